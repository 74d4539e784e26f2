"""Print the tasks that failed in an ansible-playbook / molecule log, each under its TASK header.

A CI log of a long scenario often keeps only its head and tail, and the tail of a failed molecule run is the
destroy step. Printing the failures again at the very end, each cut to a few lines, keeps them in what CI shows.
The failures that ended a host come first: those after which the host has no further result in that playbook run
(before its PLAY RECAP). Failures the play went on after (rescued by a block, or a bad-input case a scenario expects)
follow. Within each kind the first come first: a host that failed leaves later plays, whose tasks then fail on its
missing facts.
"""
import re
import sys

FAILURE = re.compile(r"^(fatal: \[|failed: \[|ERROR! |\S.*FAILED! =>)")
TASK = re.compile(r"^(TASK|RUNNING HANDLER) \[")
FAILED_HOST = re.compile(r"^(?:fatal|failed): \[([^\]]+?)(?: -> [^\]]*)?\]")
# A later result of a host: it went on after the failure (rescued, or a loop's other items).
HOST_RESULT = re.compile(r"^(?:ok|changed|skipping|fatal|failed): \[([^\]]+?)(?: -> [^\]]*)?\]"
                         r"|^included: .* for (.+)$")
RUN_END = re.compile(r"^PLAY RECAP")
# A top-level key of a result printed by the yaml result format (ANSIBLE_CALLBACK_RESULT_FORMAT=yaml).
RESULT_KEY = re.compile(r"^    ([A-Za-z_]\w*):")
LINES_PER_FAILURE = 12
CHARACTERS_PER_LINE = 200
FAILURES_SHOWN = 3
LINES_SCANNED = 400
# Keys that never say why a task failed; `cmd` does, a little, so it comes after the reasons.
NOISE_KEYS = {"changed", "delta", "end", "start", "stderr_lines", "stdout_lines", "invocation", "ansible_facts"}
REASON_KEYS = ("msg", "stderr", "module_stderr", "rc", "stdout", "module_stdout", "assertion", "evaluated_to")


def result_lines(lines):
    """The failure line, then the result's reasons first (msg, stderr, rc, ...), its noise (times, *_lines) left out."""
    groups = []
    for line in lines[1:]:
        match = RESULT_KEY.match(line)
        if match or not groups:
            groups.append((match.group(1) if match else "", []))
        groups[-1][1].append(line)

    def rank(group):
        key = group[0]
        return REASON_KEYS.index(key) if key in REASON_KEYS else len(REASON_KEYS)

    kept = [group for group in groups if group[0] not in NOISE_KEYS]
    return [lines[0], *(line for _key, group in sorted(kept, key=rank) for line in group)]


def went_on(lines, start, host):
    """Whether ``host`` has a result after line ``start`` in the same playbook run."""
    for line in lines[start:]:
        if RUN_END.match(line):
            return False
        match = HOST_RESULT.match(line)
        if match and host in ([match.group(1)] if match.group(1) else match.group(2).split(", ")):
            return True
    return False


def failures(lines):
    """Yield (task header, failure block, whether the host went on after it) for each failure in the log."""
    header = ""
    for number, line in enumerate(lines):
        if TASK.match(line):
            header = line.rstrip()
        elif FAILURE.match(line):
            block = [line.rstrip()]
            for following in lines[number + 1:number + LINES_SCANNED]:
                if following.strip() and not following.startswith(" "):
                    break
                block.append(following.rstrip())
            while block and not block[-1]:
                block.pop()
            after = lines[number + len(block):number + len(block) + 3]
            if not any(text.startswith("...ignoring") for text in after):
                host = FAILED_HOST.match(line)
                yield (header, [text[:CHARACTERS_PER_LINE] for text in result_lines(block)[:LINES_PER_FAILURE]],
                       bool(host) and went_on(lines, number + len(block), host.group(1)))


def main(path):
    with open(path, encoding="utf-8", errors="replace") as log:
        lines = log.readlines()
    found = list(failures(lines))
    ordered = [failure for failure in found if not failure[2]] + [failure for failure in found if failure[2]]
    for header, block, host_went_on in ordered[:FAILURES_SHOWN]:
        print(header + ("  (the play went on after this one)" if host_went_on else ""))
        print("\n".join(block))
        print()
    if len(found) > FAILURES_SHOWN:
        went_on_count = sum(1 for failure in ordered[FAILURES_SHOWN:] if failure[2])
        print(f"({len(found) - FAILURES_SHOWN} more failure(s) in {path}, {went_on_count} of them followed by more of "
              "the same host's tasks)")
    if not found:
        print(f"(no failed task in {path}; see the log above)")


if __name__ == "__main__":
    main(sys.argv[1])
