"""`topofinder sweep SPEC.toml`: frontiers for many (N, d) (:func:`topofinder.api.sweep`)."""

from __future__ import annotations

from topofinder import api


def add(sub) -> None:
    p = sub.add_parser("sweep", help="frontiers for many (N, d) from a spec file",
                       description="""\
        Run the finder for every (N, d) of a TOML spec and write OUT/<name>/: one file per
        cell (resumable), frontier.csv/.json, best.csv and the best-topology-per-N plots. A
        spec has: name = "paper"; degrees = [2, 4]; n = [32, 64] or n_min = 4 and n_max =
        2000; bidirectional = false; verify = false (true: build and replay every frontier
        point); and a [workload] table with alpha = "10us", bandwidth = "100Gbps", sizes =
        ["1MB", "100MB"] (one best-per-N ranking per size).""")
    p.add_argument("spec", metavar="SPEC.toml", help="sweep specification")
    p.add_argument("--jobs", type=int, default=None, help="parallel workers (default: all cores)")
    p.add_argument("--no-cache", action="store_true", help="do not read or write the disk cache")
    p.add_argument("--backend", choices=["loky", "dask"], default="loky",
                   help="joblib backend: local processes (loky) or a Dask cluster")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="Dask scheduler address (with --backend dask; default: a local cluster)")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="results folder (default: ./results in the working directory)")
    p.set_defaults(run=run)


def run(args) -> int:
    done = api.sweep(args.spec, args.out, jobs=args.jobs, use_cache=not args.no_cache,
                     backend=args.backend, scheduler=args.scheduler)
    failed, out = done.failed, done.out
    print(f"sweep {done.name}: {done.cells - len(failed)} of {done.cells} cells written to "
          f"{out}" + (f"; {len(failed)} failed (listed in {out / 'failed.csv'}; a rerun "
                      f"retries them), first: N = {failed[0]['N']}, d = {failed[0]['d']}: "
                      f"{failed[0]['error']}" if failed else ""))
    return 1 if failed else 0
