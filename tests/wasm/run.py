#!/usr/bin/env python3
"""Runs the module of tests/wasm/lib.rs under wasmtime (the `wasmtime` package
from PyPI, which carries the runtime): `run.py MODULE.wasm fair|barging
[SEQUENCES]`. It checks the build's order and spinning against what the
target should have (`fair`: FIFO and no spinning, a target without a clock;
`barging`: the default's bounded barging with spinning), then runs the random
sequences and the LockRef checks. A panic inside the module traps, and the
trap fails the run; on wasm32-wasip1 the panic's message is printed first."""
import sys

import wasmtime


def main():
    path, order = sys.argv[1], sys.argv[2]
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module.from_file(engine, path)
    linker = wasmtime.Linker(engine)
    if any(i.module.startswith("wasi") for i in module.imports):
        linker.define_wasi()
        wasi = wasmtime.WasiConfig()
        wasi.inherit_stdout()
        wasi.inherit_stderr()
        store.set_wasi(wasi)
    exports = linker.instantiate(store, module).exports(store)
    if "_initialize" in exports:
        exports["_initialize"](store)

    bits = exports["tuning"](store)
    fair, spin = bool(bits & 1), bool(bits & 2)
    want = {"fair": (True, False), "barging": (False, True)}[order]
    if (fair, spin) != want:
        sys.exit(f"{path}: fair={fair} spin={spin}, expected fair={want[0]} spin={want[1]}")
    ran = exports["sequences"](store, 0, count)
    checks = exports["lockref"](store)
    compared = "each step compared with tokio's" if fair else "the invariants checked"
    print(f"{path}: fair={fair} spin={spin}; {ran} sequences on the RwLocks and the Mutexes "
          f"({compared}); {checks} LockRef checks")


if __name__ == "__main__":
    try:
        main()
    except wasmtime.Trap as trap:
        sys.exit(f"{sys.argv[1]}: trapped (a panic in the module): {trap}")
