"""Print the tasks that failed in an ansible-playbook / molecule log, each under its TASK header.

A CI log of a long scenario often keeps only its head and tail, and the tail of a failed molecule run is the
destroy step. Printing the failures again at the very end, each cut to a few lines, keeps them in what CI shows.
The first failures are printed: a host that failed leaves later plays, whose tasks then fail on its missing facts.
"""
import re
import sys

FAILURE = re.compile(r"^(fatal: \[|failed: \[|ERROR! |\S.*FAILED! =>)")
TASK = re.compile(r"^(TASK|RUNNING HANDLER) \[")
LINES_PER_FAILURE = 12
CHARACTERS_PER_LINE = 200
FAILURES_SHOWN = 3


def failures(lines):
    """Yield (task header, failure block) for each failure in the log."""
    header = ""
    for number, line in enumerate(lines):
        if TASK.match(line):
            header = line.rstrip()
        elif FAILURE.match(line):
            block = []
            for following in lines[number:number + LINES_PER_FAILURE]:
                if block and (TASK.match(following) or following.startswith("PLAY ")):
                    break
                block.append(following.rstrip()[:CHARACTERS_PER_LINE])
            if not any(text.startswith("...ignoring") for text in block):
                yield header, block


def main(path):
    with open(path, encoding="utf-8", errors="replace") as log:
        lines = log.readlines()
    found = list(failures(lines))
    for header, block in found[:FAILURES_SHOWN]:
        print(header)
        print("\n".join(block))
        print()
    if len(found) > FAILURES_SHOWN:
        print(f"({len(found) - FAILURES_SHOWN} later failure(s) in {path})")
    if not found:
        print(f"(no failed task in {path}; see the log above)")


if __name__ == "__main__":
    main(sys.argv[1])
