"""`benchlib store start|stop|status`: the workbook's own object store on loopback
(benchlib.store.server): rclone's `serve s3` over outputs/store/data, its endpoint and keys
in outputs/store/server.json."""

from __future__ import annotations

import benchlib.cli.common as common


def cmd_store(args) -> int:
    import os

    from benchlib.store import server

    if args.outputs:
        os.environ["BENCHLIB_OUTPUTS"] = str(common.outputs(args))
    if args.action == "start":
        store = server.start(args.port)
        print(f"store: {store.endpoint} (pid {store.pid}), serving {store.root}; keys in "
              f"{server.state_file()}")
        print(f"export {' '.join(f'{k}={v}' for k, v in store.env().items())}")
    elif args.action == "stop":
        print("store: stopped" if server.stop() else "store: none was running")
    else:
        store = server.status()
        if store is None:
            print("store: not running (python -m benchlib store start)")
            return 1
        print(f"store: {store.endpoint} (pid {store.pid}), serving {store.root}")
    return 0


def add_parsers(sub) -> None:
    p = sub.add_parser("store", help="start, stop or ask after the workbook's S3 store on "
                       "loopback (the input pipeline's rows start it themselves)")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--port", type=int, help="start: the port on 127.0.0.1 (default: a free one)")
    p.add_argument("--outputs", help=common.OUTPUTS_HELP)
    p.set_defaults(func=cmd_store)
