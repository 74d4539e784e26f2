"""Expert parallelism over torch.distributed: the plans of ``moe_balance.placement`` carried out.

- between steps: ``load_placement`` reads the file ``playbooks/rebalance.yml`` writes and refuses one planned for
  another job; ``apply_placement`` (or ``ExpertParallelMoE.apply_placement``) moves only the slots whose expert
  changes, optimizer state included, in one batch of point-to-point sends;
- per micro-batch: ``ExpertParallelMoE`` all-gathers the counts, plans replicas (``plan_replicas``), copies guest
  weights into spare slots, dispatches and combines tokens with ``all_to_all_single``, and sends each guest's weight
  gradient home in backward;
- training with redundant slots: ``sum_replica_gradients`` after backward gives every slot of an expert the
  expert's whole gradient, so the slots stay identical;
- measured: ``ExpertParallelMoE.last_stats`` per rank, ``gather_execution_record`` for the group (tokens computed
  per rank against the plan's prediction, bytes moved within and across nodes).

NCCL on GPUs, gloo on CPUs; tested on gloo across processes. Imported on demand, never from ``moe_balance``.
"""

from .agreement import ExpertParallelError
from .config import ExpertParallelConfig
from .exchange import all_to_all_rows
from .experts import SlotExperts, expert_ffn
from .layer import ExpertParallelMoE
from .placement_file import ExpertPlacement, default_phy2log, load_placement
from .placement_moves import (
    PlacementMove,
    SlotMove,
    apply_placement,
    apply_slot_rows,
    module_slot_rows,
    plan_slot_moves,
    slot_tensors,
)
from .record import SCHEMA, MicroBatchStats, gather_execution_record, make_execution_record
from .replica_gradients import sum_replica_gradients

__all__ = [
    "SCHEMA",
    "ExpertParallelConfig",
    "ExpertParallelError",
    "ExpertParallelMoE",
    "ExpertPlacement",
    "MicroBatchStats",
    "PlacementMove",
    "SlotExperts",
    "SlotMove",
    "all_to_all_rows",
    "apply_placement",
    "apply_slot_rows",
    "default_phy2log",
    "expert_ffn",
    "gather_execution_record",
    "load_placement",
    "make_execution_record",
    "module_slot_rows",
    "plan_slot_moves",
    "slot_tensors",
    "sum_replica_gradients",
]
