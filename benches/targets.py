#!/usr/bin/env python3
"""The README's targets table, from the showdown's own output.

    python3 benches/targets.py 90 91 92            # runs from docs/showdown/
    python3 benches/targets.py --paired 93         # ratios round by round
    python3 benches/targets.py path/to/run.json    # any --json file
    python3 benches/targets.py --check README.md   # CI: the README's table is this

Each argument is a run number (its `docs/showdown/*-runN.json`, with the
`.txt` beside it for the host's total steal and the line crossings) or a
JSON file that `showdown --full --json FILE` wrote. Prints one markdown
table, a column per run and a row per target of issues 2 and 4, with the
met cells in bold, in the layout of the README's "Against the targets".

A ratio is hybrid-sync's figure over the peer's, both from their median
rounds (the table columns the showdown prints). With `--paired` it is the
median of the rounds' ratios instead, for the tables whose JSON keeps every
round (from run 93 on; a cell that falls back to the median rounds is
marked `*`): each round runs every contender back to back, so a change of
the host's pace between two contenders' median rounds does not move it
(docs/performance.md, "The host's two paces"). The CPU per operation beside
a rate, which the JSON keeps for the median round only, is the median
rounds' in either mode.

The size row (`RwLock<()>`, `Mutex<()>` at most 16 bytes) is not a
showdown figure: `tests/locks.rs` checks it, and the README states it.

`--check FILE` finds the targets table in FILE (its header names the runs:
`| target | run 90 | run 91 | run 92 (the output below) |`, and says
`| target, round by round | ...` for a table made with `--paired`),
computes it anew from those runs' JSON and fails, printing both, where a
row or the note on the cells marked `*` differs.
"""

import glob
import json
import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHOWDOWN = os.path.join(HERE, "..", "docs", "showdown")
H = "hybrid-sync"
PL13, PL12 = "parking_lot", "parking_lot 0.12"


class Run:
    def __init__(self, arg, paired):
        if arg.isdigit():
            found = glob.glob(os.path.join(SHOWDOWN, f"*-run{arg}.json"))
            if len(found) != 1:
                sys.exit(f"targets.py: run {arg}: expected one docs/showdown/*-run{arg}.json, found {len(found)}")
            path, self.label = found[0], f"run {arg}"
        else:
            path, self.label = arg, os.path.basename(arg)
        with open(path) as f:
            doc = json.load(f)
        self.machine = doc["machine"]
        self.tables = doc["tables"]
        self.paired = paired
        self.fell_back = False
        txt = path[: -len(".json")] + ".txt"
        self.text = open(txt).read() if os.path.exists(txt) else ""

    def table(self, prefix):
        hits = [t for t in self.tables if t["title"].startswith(prefix)]
        if not hits:
            sys.exit(f"targets.py: {self.label}: no table titled '{prefix}...'")
        return {r["name"]: r for r in hits[0]["rows"]}

    def ratio(self, prefix, peer, key="value"):
        """hybrid-sync / peer in the table whose title starts with prefix."""
        t = self.table(prefix)
        ours, theirs = t[H], t[peer]
        if self.paired and key == "value":
            a, b = ours.get("rounds") or [], theirs.get("rounds") or []
            if len(a) >= 3 and len(a) == len(b):
                return statistics.median(x / y for x, y in zip(a, b))
            self.fell_back = True
        return ours[key] / theirs[key]

    def max_ms(self, prefix, name=H):
        return self.table(prefix)[name]["max_ns"] / 1e6


def bold(text, met):
    return f"**{text}**" if met else text


def group(cells):
    """Cells joined by '; ', one bold span when all are met."""
    if all(m for _, m in cells):
        return bold("; ".join(t for t, _ in cells), True)
    return "; ".join(bold(t, m) for t, m in cells)


def met_cell(v, target, higher=True, places=2, unit="x"):
    """v against its target, as (text, met): printed with more places where
    the rounded figure would read as the other side of the target (0.995x
    is not 1.00x)."""
    met = v >= target if higher else v <= target
    text = f"{v:.{places}f}"
    while places < 6 and (float(text) >= target if higher else float(text) <= target) != met:
        places += 1
        text = f"{v:.{places}f}"
    return text + unit, met


def row_uncontended_tokio(r):
    a, b = (met_cell(r.ratio(p, "tokio"), 0.35, higher=False) for p in ("uncontended read", "uncontended lock"))
    return bold(f"{a[0]} / {b[0]}", a[1] and b[1])


def row_uncontended_pl(r):
    cells = []
    for peer in (PL13, PL12):
        a, b = (met_cell(r.ratio(p, peer), 1.5, higher=False) for p in ("uncontended read", "uncontended lock"))
        cells.append((f"{a[0]} / {b[0]}", a[1] and b[1]))
    return group(cells)


def row_async(r, prefix, tokio_target, pl_target):
    tok = met_cell(r.ratio(prefix, "tokio"), tokio_target)
    al = met_cell(r.ratio(prefix, "async-lock"), 1.2)
    pl = group([met_cell(r.ratio(prefix, p), pl_target) for p in (PL13, PL12)])
    return f"{bold(*tok)}, {pl}, {bold(*al)}"


def row_hold(r):
    w = met_cell(r.ratio("async hold across .await:", "tokio"), 1.0)
    rd = met_cell(r.ratio("async hold across .await (90%", "tokio"), 1.0)
    return f"{bold(*w)}; {bold(*rd)}"


def row_threads(r):
    cells = []
    for peer in (PL13, PL12):
        v = met_cell(r.ratio("threads: 32", peer), 1.0)
        cpu = met_cell(r.ratio("threads: 32", peer, key="cpu_ns_per_op"), 1.0, higher=False)
        cells.append((f"{v[0]} at {cpu[0]}", v[1] and cpu[1]))
    return group(cells)


def row_max_wait(r):
    waits = [r.max_ms(p) for p in ("async write-heavy", "async read-heavy", "threads: 32", "mixed: 4")]
    cells = [met_cell(w, 5.0, higher=False, unit="") for w in waits]
    if all(m for _, m in cells):
        return bold(", ".join(t for t, _ in cells), True) + " ms"
    return ", ".join(bold(t, m) for t, m in cells) + " ms"


def row_seed000(r, prefix, target):
    pl = group([met_cell(r.ratio(prefix, p), target) for p in (PL13, PL12)])
    one = met_cell(r.ratio(prefix, "hybrid 1-delay"), target, places=3)
    return f"{pl}, {bold(*one)}"


def row_seed002(r):
    parts = []
    for prefix in ("seed 002: fairness, 1 ", "seed 002: fairness, 4 "):
        ms = met_cell(r.max_ms(prefix), 2.0, higher=False, unit=" ms")
        totals = group([met_cell(r.ratio(prefix, p), 0.8) for p in (PL13, PL12)])
        parts.append(f"{bold(*ms)} at {totals}")
    return "; ".join(parts)


def row_seed003(r, first):
    t = r.table("seed 003: spin time")
    ours, bug = t[H]["value"], t["spins on (bug)"]["value"]
    if first:
        return f"{bold(f'{ours:.1f} ns/op', ours == 0.0)} (spinning on: {bug:.1f})"
    return f"{bold(f'{ours:.1f}', ours == 0.0)} ({bug:.1f})"


def row_seed004(r):
    v = met_cell(r.ratio("seed 004: 1000 threads", "plain parking"), 1.0)
    cpu = met_cell(r.ratio("seed 004: 1000 threads", "plain parking", key="cpu_ns_per_op"), 1.0, higher=False)
    return bold(f"{v[0]} at {cpu[0]}", v[1] and cpu[1])


def row_run(r):
    floor = re.search(r"stall floor ([\d.]+) ms", r.machine)
    start = re.search(r"crosses between two in (\d+) ns", r.machine)
    end = re.search(r"crosses between two CPUs in (\d+) ns at the end", r.text)
    stolen = re.search(r"the host stole (\d+) ms of the vCPUs' time", r.text)
    cells = [
        f"{floor.group(1)} ms" if floor else "-",
        f"{int(stolen.group(1)) / 1000:.2f} s" if stolen else "-",
        f"{start.group(1)} ns" if start else "-",
    ]
    if end:
        cells[2] += f" ({end.group(1)} ns at the end)"
    return "; ".join(cells)


ROWS = [
    ("uncontended read / lock: at most 0.35x tokio", row_uncontended_tokio),
    ("the same: at most 1.5x parking_lot (0.13; 0.12)", row_uncontended_pl),
    (
        "async write-heavy: 3x tokio, 1.0x parking_lot (0.13; 0.12), 1.2x async-lock",
        lambda r: row_async(r, "async write-heavy", 3.0, 1.0),
    ),
    (
        "async read-heavy: 3.5x tokio, 0.95x parking_lot (0.13; 0.12), 1.2x async-lock",
        lambda r: row_async(r, "async read-heavy", 3.5, 0.95),
    ),
    ("hold across `.await`: 1.0x tokio (write guards; 90% reads)", row_hold),
    ("32 threads: 1.0x parking_lot at no more CPU (0.13; 0.12)", row_threads),
    ("max wait at most 5 ms: write-heavy, read-heavy, 32 threads, mixed", row_max_wait),
    (
        "seed 000, short lock: 1.1x parking_lot (0.13; 0.12), 1.1x one delay per thread",
        lambda r: row_seed000(r, "seed 000, the short", 1.1),
    ),
    ("seed 000, long lock: no slower than either", lambda r: row_seed000(r, "seed 000, the long", 1.0)),
    (
        "seed 002: slow thread at most 2 ms, total 0.8x parking_lot (0.13; 0.12) (1 tight thread; 4)",
        row_seed002,
    ),
    ("seed 003: no spin time under a pending handoff", None),
    ("seed 004, 1000 threads: the plain parking lock's rate at no more CPU", row_seed004),
    ("the run: stall floor; stolen by the host; a line crossing", row_run),
]


PAIRED_HEAD = "target, round by round"
FELL_BACK_NOTE = (
    "\\* from the median rounds: the table keeps no rounds (the uncontended ones take each"
    " contender's best round, seed 002 reports its own figures, and runs before 93 kept none)"
)


def render(runs):
    """The table's lines, header first, and the note on the cells marked
    `*` (None where no cell fell back)."""
    head = PAIRED_HEAD if any(r.paired for r in runs) else "target"
    lines = [f"| {head} | " + " | ".join(r.label for r in runs) + " |", "|---" * (len(runs) + 1) + "|"]
    any_fell_back = False
    for title, cell in ROWS:
        cells = []
        for i, r in enumerate(runs):
            r.fell_back = False
            text = row_seed003(r, i == 0) if cell is None else cell(r)
            if r.fell_back:
                text += " \\*"
                any_fell_back = True
            cells.append(text)
        lines.append(f"| {title} | " + " | ".join(cells) + " |")
    return lines, FELL_BACK_NOTE if any_fell_back else None


def check(path):
    """Whether the targets table in the markdown file at path is what the
    runs its header names give."""
    text = open(path).read().split("\n")
    heads = [i for i, line in enumerate(text) if re.match(rf"\| (target|{PAIRED_HEAD}) \| run \d+ \|", line)]
    if len(heads) != 1:
        sys.exit(f"targets.py: {path}: expected one targets table ('| target | run N | ...'), found {len(heads)}")
    start = heads[0]
    paired = text[start].startswith(f"| {PAIRED_HEAD} |")
    end = start
    while end < len(text) and text[end].startswith("|"):
        end += 1
    table = text[start:end]
    numbers = re.findall(r"\| run (\d+)", table[0])
    # The header's notes ("the output below") and the size row are the README's own.
    ours = [re.sub(r"\| run (\d+) \([^|]*\)", r"| run \1", table[0])] + [
        line for line in table[1:] if not line.startswith("| `RwLock<()>`")
    ]
    computed, note = render([Run(n, paired) for n in numbers])
    how = "round by round" if paired else "from the median rounds"
    # The note on the cells marked `*` follows the table after one blank line.
    theirs_note = text[end + 1] if end + 1 < len(text) and text[end] == "" and text[end + 1].startswith("\\*") else None
    if ours == computed and theirs_note == note:
        print(f"{path}: the targets table of runs {', '.join(numbers)} ({how}) is what their JSON gives ({len(ours)} lines)")
        return True
    print(f"{path}: the targets table ({how}) differs from what the JSON of runs {', '.join(numbers)} gives:")
    for a, b in zip(ours + [""] * len(computed), computed + [""] * len(ours)):
        if a != b:
            print(f"  {path}: {a}\n  computed: {b}")
    if theirs_note != note:
        print(f"  {path}'s note under the table: {theirs_note}\n  computed: {note}")
    return False


def main(argv):
    if argv[:1] == ["--check"] and len(argv) == 2:
        sys.exit(0 if check(argv[1]) else 1)
    paired = "--paired" in argv
    args = [a for a in argv if a != "--paired"]
    if not args or any(a.startswith("-") for a in args):
        sys.exit(__doc__)
    lines, note = render([Run(a, paired) for a in args])
    print("\n".join(lines + (["", note] if note else [])))


if __name__ == "__main__":
    main(sys.argv[1:])
