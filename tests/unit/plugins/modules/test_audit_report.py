"""audit_report renders what the three reporters really return (run here on snapshots and captured output) into
Markdown, a self-contained HTML page with well-formed inline SVG charts, and JSON; rewrites only what changed."""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path
from xml.etree import ElementTree

import pytest

from ansible_collections.hpc.balance.plugins.modules import (
    audit_report,
    iperf3_throughput,
    ipvs_spread,
    tokens_per_expert,
)

FIXTURES = Path(__file__).resolve().parents[1] / "module_utils" / "fixtures"


@pytest.fixture
def reports(run_module, tmp_path, monkeypatch):
    """Real results of the three reporters: IPVS from a /proc snapshot, iperf3 from captured -J output, experts
    from the JSONL fixture."""
    proc = tmp_path / "proc"
    proc.mkdir()
    shutil.copy(FIXTURES / "proc_ip_vs_dr.txt", proc / "ip_vs")
    _failed, network = run_module(ipvs_spread, {"source": "proc", "proc_net_path": str(proc)})
    _failed, compute = run_module(tokens_per_expert, {"path": str(FIXTURES / "moe_tokens_per_expert.jsonl")})
    captured = (FIXTURES / "iperf3_tcp_p8.json").read_text()
    with monkeypatch.context() as patch:
        patch.setattr(iperf3_throughput.AnsibleModule, "run_command", lambda self, args, **kw: (0, captured, ""))
        link_args = {"target": "127.0.0.1", "port": 52013, "duration_s": 3,
                     "expected_link_bits_per_second": 10_000_000_000, "member_count": 2}
        _failed, link = run_module(iperf3_throughput, link_args)
    return {"ipvs_spread": {"lvs1": registered(network)}, "iperf3_throughput": {"client1": registered(link)},
            "tokens_per_expert": {"gpu1": registered(compute)}}


def registered(result):
    """A module result as a playbook registers it: warnings are plain texts there (2.19 events here)."""
    texts = [item["event"]["msg"] if isinstance(item, dict) else item for item in result.get("warnings", [])]
    return dict(result, warnings=texts) if texts else result


def test_writes_three_files_with_verdicts(run_module, reports, tmp_path):
    dest = tmp_path / "audit"
    failed, result = run_module(audit_report, dict(reports, dest=str(dest)))
    assert not failed and result["changed"] is True
    assert result["files"] == {"markdown": str(dest / "report.md"), "html": str(dest / "report.html"),
                               "json": str(dest / "report.json")}
    assert sorted(path.name for path in dest.iterdir()) == ["report.html", "report.json", "report.md"]
    assert result["verdicts"] == {"network": "imbalanced", "host_link": "balanced", "compute": "imbalanced"}
    # The host lines are the reporter's own summary (ipvs_spread words them); the layer line is the report's.
    assert result["summary"][0] == "network: imbalanced - worst deviation from the weights 50.0 % (limit 15 %)"
    assert result["summary"][1].startswith("  lvs1: TCP 198.18.0.100:80 (wlc): balanced, 2 real servers")
    assert result["summary"][2].startswith("  lvs1: UDP 198.18.0.100:53 (rr): NOT balanced, 3 real servers")
    markdown = (dest / "report.md").read_text()
    assert markdown.startswith("# hpc.balance audit\n\n## Network layer (LVS / IPVS connection spread): imbalanced\n\n"
                               "Reason: worst deviation from the weights 50.0 % (limit 15 %)\n")
    assert "#### gpu1 - layer 1: max/mean 3.05, CV 0.845 (severe), imbalanced" in markdown
    # The rr service's expected shares are equal whatever the weights (ip_vs_rr.c): 25 % against 50 %.
    assert "| 198.18.0.12 | 53 | Masq | 1 | 0 | 1 | 1 | 25.0 % | 50.0 % | -50.0 % |" in markdown
    document = json.loads((dest / "report.json").read_text())
    assert document["verdicts"] == result["verdicts"]
    assert "invocation" not in document["results"]["ipvs_spread"]["lvs1"]


def test_html_is_self_contained_with_well_formed_charts(run_module, reports, tmp_path):
    _failed, result = run_module(audit_report, dict(reports, dest=str(tmp_path)))
    page = Path(result["files"]["html"]).read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</body></html>")
    assert "<script" not in page and not re.search(r"\b(src|href)=", page)
    assert re.findall(r"https?://[^\"']+", page) == ["http://www.w3.org/2000/svg"] * page.count("<svg")
    charts = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(charts) == 2 + 1 + 2  # two IPVS services, one iperf3 run, two MoE layers
    for chart in charts:
        ElementTree.fromstring(chart)  # raises on malformed XML
    streams = ElementTree.fromstring(charts[2])
    assert len(streams.findall("{http://www.w3.org/2000/svg}rect")) == 8
    assert streams.find("{http://www.w3.org/2000/svg}rect/{http://www.w3.org/2000/svg}title").text == \
        "stream 0: 2.68 Gbit/s"
    experts = ElementTree.fromstring(charts[4])
    classes = [rect.get("class") for rect in experts.findall("{http://www.w3.org/2000/svg}rect")]
    assert (classes[0], classes[7]) == ("bar hot", "bar idle")


def test_second_run_changes_nothing_and_a_timestamp_changes_all(run_module, reports, tmp_path):
    args = dict(reports, dest=str(tmp_path))
    run_module(audit_report, args)
    _failed, again = run_module(audit_report, args)
    assert (again["changed"], again["written"]) == (False, [])
    _failed, stamped = run_module(audit_report, dict(args, timestamp="2024-04-12T10:00:00Z"))
    assert stamped["changed"] is True and len(stamped["written"]) == 3
    assert "Audited: 2024-04-12T10:00:00Z" in Path(stamped["files"]["markdown"]).read_text()


def test_check_mode_renders_nothing(run_module, reports, tmp_path):
    dest = tmp_path / "audit"
    _failed, result = run_module(audit_report, dict(reports, dest=str(dest), _ansible_check_mode=True))
    assert result["changed"] is True and len(result["written"]) == 3
    assert not dest.exists()


def test_failed_skipped_and_missing_reporters(run_module, tmp_path):
    failed, result = run_module(audit_report, {
        "dest": str(tmp_path),
        "ipvs_spread": {"lvs1": {"failed": True, "msg": "/proc/net/ip_vs does not exist"}},
        "iperf3_throughput": {"client1": {"skipped": True, "changed": False}},
    })
    assert not failed
    assert result["verdicts"] == {"network": "error", "host_link": "skipped", "compute": "not run"}
    assert result["summary"] == ["network: error - the reporter failed on lvs1",
                                 "  lvs1: reporter failed: /proc/net/ip_vs does not exist",
                                 "host_link: skipped", "  client1: skipped", "compute: not run"]
    assert "No host ran this reporter." in Path(result["files"]["markdown"]).read_text()


def test_dest_that_is_a_file_is_refused(run_module, tmp_path):
    target = tmp_path / "report"
    target.write_text("x")
    failed, result = run_module(audit_report, {"dest": str(target)})
    assert failed and result["msg"] == (
        f"dest {target} exists and is not a directory; give a directory for the report files")


CHROMIUM = shutil.which("chromium")
# CI installs chromium (make setup); there a missing browser is a failure, not a skip.
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not os.environ.get("CI"), reason="chromium is not installed")


def _headless_chromium(tmp_path, *args):
    return subprocess.run(
        [CHROMIUM or "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         f"--user-data-dir={tmp_path / 'chromium-profile'}", "--enable-logging=stderr", "--v=0", *args],
        capture_output=True, text=True, timeout=120, check=False,
    )


@needs_chromium
def test_html_report_opens_in_headless_chromium_without_errors(run_module, reports, tmp_path):
    dest = tmp_path / "audit"
    run_module(audit_report, dict(reports, dest=str(dest)))
    page = (dest / "report.html").as_uri()
    screenshot = tmp_path / "report.png"

    shot = _headless_chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1200,1800", page)
    assert shot.returncode == 0, shot.stderr
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 20_000, "the screenshot is (nearly) blank"
    assert "ERROR:CONSOLE" not in shot.stderr and "Uncaught" not in shot.stderr, shot.stderr

    dom = _headless_chromium(tmp_path, "--dump-dom", page)
    assert dom.returncode == 0, dom.stderr
    assert dom.stdout.count("<svg") >= 3, "one chart per layer is expected in the rendered page"


def skewed_records(path, layers, experts, top_k=8, seed=7):
    """A tokens_per_expert JSONL like DeepSeek-V3's shape: every layer has a few hot experts, some much hotter."""
    rng = random.Random(seed)
    with open(path, "w") as handle:
        for layer in range(layers):
            weights = [rng.lognormvariate(0.0, 0.35 + 0.6 * (layer % 7 == 3)) for _expert in range(experts)]
            tokens = [int(1000 * weight) for weight in weights]
            tokens[-1] += top_k - sum(tokens) % top_k if sum(tokens) % top_k else 0
            handle.write(json.dumps({"schema": "moe_balance.tokens_per_expert/1", "step": 100, "layer": layer,
                                     "tokens_per_expert": tokens, "top_k": top_k,
                                     "num_tokens": sum(tokens) // top_k}) + "\n")
    return path


def test_vrrp_only_directors_make_a_stated_skip(run_module, tmp_path):
    skip = {"changed": False, "skipped": True, "skip_reason": "VRRP only: this kernel has no IPVS"}
    _failed, result = run_module(audit_report, {"dest": str(tmp_path), "ipvs_spread": {"dir1": skip, "dir2": skip}})
    assert result["verdicts"]["network"] == "skipped"
    assert result["reasons"]["network"] == "VRRP only: this kernel has no IPVS"
    markdown = Path(result["files"]["markdown"]).read_text()
    assert "## Network layer (LVS / IPVS connection spread): skipped\n\nReason: VRRP only: this kernel has no IPVS" \
        in markdown


def test_history_keeps_a_bounded_count_and_shows_the_trend(run_module, reports, tmp_path):
    history = tmp_path / "history"
    args = dict(reports, dest=str(tmp_path / "audit"), history_dir=str(history), history_count=3)
    results = [run_module(audit_report, args)[1] for _run in range(4)]
    assert sorted(path.name for path in history.iterdir()) == [
        "report-000002.json", "report-000003.json", "report-000004.json"]
    assert results[0]["changes"] == ["first run in the history: nothing to compare with"]
    assert results[1]["changes"] == ["nothing changed since the previous run"]
    assert results[3]["history"] == {"file": str(history / "report-000004.json"), "runs": 2,
                                     "pruned": [str(history / "report-000001.json")]}
    page = Path(results[3]["files"]["html"]).read_text()
    assert "Trend over the last 3 runs" in page and page.count("<polyline") == 3
    assert json.loads((history / "report-000004.json").read_text())["run"] == 4


def test_history_in_check_mode_writes_and_deletes_nothing(run_module, reports, tmp_path):
    history = tmp_path / "history"
    _failed, result = run_module(audit_report, dict(reports, dest=str(tmp_path / "a"), history_dir=str(history),
                                                    _ansible_check_mode=True))
    assert result["changed"] is True and result["history"]["file"].endswith("report-000001.json")
    assert not history.exists()


def _real_scale_report(run_module, tmp_path, runs=3):
    """A 58 x 256 report from the real tokens_per_expert module, after ``runs - 1`` earlier runs in the history."""
    history = tmp_path / "history"
    for number in range(runs):
        jsonl = skewed_records(tmp_path / f"run{number}.jsonl", 58, 256, seed=number)
        _failed, compute = run_module(tokens_per_expert, {"path": str(jsonl)})
        _failed, result = run_module(audit_report, {
            "dest": str(tmp_path / "audit"), "tokens_per_expert": {"gpu1": registered(compute)},
            "history_dir": str(history), "title": "hpc.balance audit at 58 layers x 256 experts"})
    return result


def test_real_scale_report_has_one_heatmap_and_bars_for_the_worst_layers(run_module, tmp_path):
    result = _real_scale_report(run_module, tmp_path)
    page = Path(result["files"]["html"]).read_text()
    charts = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    for chart in charts:
        ElementTree.fromstring(chart)
    assert sum("heatmap" in chart[:300] for chart in charts) == 1
    assert page.count("<h4>gpu1 - layer ") == 4
    assert "expert 0expert" not in page
    assert len(page) < 1_500_000


@needs_chromium
def test_real_scale_report_screenshot_in_headless_chromium(run_module, tmp_path):
    result = _real_scale_report(run_module, tmp_path)
    page = Path(result["files"]["html"]).as_uri()
    screenshot = Path(os.environ.get("HPC_BALANCE_SCREENSHOT") or tmp_path / "report-58x256.png")
    shot = _headless_chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1280,2600",
                              "--hide-scrollbars", page)
    assert shot.returncode == 0, shot.stderr
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert screenshot.stat().st_size > 60_000, "the screenshot is (nearly) blank"
    assert "ERROR:CONSOLE" not in shot.stderr and "Uncaught" not in shot.stderr, shot.stderr
