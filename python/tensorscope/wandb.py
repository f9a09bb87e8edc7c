"""python -m tensorscope.wandb SESSION_DIR [--project P] [--metrics l2,max_abs]
[--streams REGEX] [--live-url URL] [--follow]: a session's summaries and anomalies into a
new W&B run (tensorscope._wandb_export; WANDB_MODE=offline works as wandb's does)."""

from __future__ import annotations

import argparse
import sys
from typing import List, Optional

from ._wandb_export import DEFAULT_METRICS, EXPORT_METRICS, export_wandb


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tensorscope.wandb",
                                     description="Log a tensorscope session's summaries and anomalies into W&B.")
    parser.add_argument("session_dir", help="the session folder (<output>/<session>)")
    parser.add_argument("--project", default=None, help="the W&B project (default: wandb's)")
    parser.add_argument("--metrics", default=",".join(DEFAULT_METRICS),
                        help=f"comma-separated, of {', '.join(EXPORT_METRICS)}")
    parser.add_argument("--streams", default=".*", help="a regular expression the stream names match whole")
    parser.add_argument("--live-url", default="", help="the live page's address, for the anomalies' links")
    parser.add_argument("--follow", action="store_true", help="go on as the session grows (until ^C)")
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between polls with --follow")
    args = parser.parse_args(argv)
    try:
        export_wandb(args.session_dir, project=args.project, metrics=[m for m in args.metrics.split(",") if m],
                     streams=args.streams, live_url=args.live_url, follow=args.follow, interval=args.interval,
                     progress=lambda n: print(f"tensorscope.wandb: {n} logged", flush=True))
    except (ValueError, ImportError) as e:
        print(f"tensorscope.wandb: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
