#!/usr/bin/env python3
"""Runs the module of tests/wasm/lib.rs under wasmtime (the `wasmtime` package
from PyPI, which carries the runtime): `run.py MODULE.wasm fair|barging
[SEQUENCES]`. It checks the build's order and spinning against what the
target should have (`fair`: FIFO and no spinning, a target without a clock;
`barging`: the default's bounded barging with spinning), then runs the random
sequences, the LockRef checks and blocking acquisitions of free locks. A
panic inside the module traps, and the trap fails the run (on wasm32-wasip1
the panic's message is printed with it). Last, a blocking wait for a held
lock, hybrid-sync's and tokio's, must trap: neither target has another thread
to release it."""
import sys
import tempfile

import wasmtime


def instantiate(path, stderr):
    """A fresh instance of the module (a trap leaves an instance's stack and
    locks as they were, so each expected trap gets its own), with WASI's
    stderr written to `stderr` where the module imports WASI."""
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module.from_file(engine, path)
    linker = wasmtime.Linker(engine)
    if any(i.module.startswith("wasi") for i in module.imports):
        linker.define_wasi()
        wasi = wasmtime.WasiConfig()
        wasi.inherit_stdout()
        wasi.stderr_file = stderr
        store.set_wasi(wasi)
    exports = linker.instantiate(store, module).exports(store)
    if "_initialize" in exports:
        exports["_initialize"](store)
    return store, exports


def must_panic(path, export, message):
    """Calls `export` in a fresh instance: it must trap, and where WASI
    carries the panic's message out, the message must contain `message`."""
    with tempfile.NamedTemporaryFile("r") as stderr:
        store, exports = instantiate(path, stderr.name)
        try:
            exports[export](store)
        except wasmtime.Trap:
            said = stderr.read()
            if said and message not in said:
                sys.exit(f"{path}: {export} panicked with {said!r}, expected {message!r}")
            # std's report: "thread '..' panicked at FILE:\nMESSAGE\nnote: ...".
            lines = said.splitlines()
            at = next((i for i, line in enumerate(lines) if " panicked at " in line), None)
            return f"panicked: {lines[at + 1]}" if at is not None and at + 1 < len(lines) else "trapped"
        sys.exit(f"{path}: {export} returned: a blocking wait for a held lock with no other thread")


def main():
    path, order = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    with tempfile.NamedTemporaryFile("r") as stderr:
        store, exports = instantiate(path, stderr.name)
        try:
            bits = exports["tuning"](store)
            fair, spin = bool(bits & 1), bool(bits & 2)
            want = {"fair": (True, False), "barging": (False, True)}[order]
            if (fair, spin) != want:
                sys.exit(f"{path}: fair={fair} spin={spin}, expected fair={want[0]} spin={want[1]}")
            ran = exports["sequences"](store, 0, count)
            checks = exports["lockref"](store)
            blocking = exports["blocking_on_free"](store)
        except wasmtime.Trap as trap:
            sys.exit(f"{path}: trapped (a panic in the module): {stderr.read()}{trap}")
    compared = "each step compared with tokio's" if fair else "the invariants checked"
    print(f"{path}: fair={fair} spin={spin}; {ran} sequences on the RwLocks and the Mutexes "
          f"({compared}); {checks} LockRef checks; {blocking} blocking acquisitions of free locks")
    ours = must_panic(path, "hybrid_blocking_on_held", "would never end")
    print(f"  a blocking wait for a held lock: {ours}")
    theirs = must_panic(path, "tokio_blocking_on_held", "")
    print(f"  tokio's, the same: {theirs}")


if __name__ == "__main__":
    main()
