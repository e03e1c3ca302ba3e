"""One model called with the batch size or the sequence length changing
from call to call (the MagPy paper's Figure 17). Every new shape is
monitored once and adds a record; a shape seen before replays its record.

    magpy-capture examples/models/varying.py --model resnet101 --vary batch --sizes 1,2,4,2,1
    magpy-capture examples/models/varying.py --model bert --vary seq --sizes 64,128,256,128 [--small]
"""
import importlib

import torch

from common import options, run


def main():
    p = options(__doc__)
    p.add_argument("--model", default="bert", help="a model script of this directory: resnet101, bert, deberta, ...")
    p.add_argument("--vary", choices=["batch", "seq"], default="seq")
    p.add_argument("--sizes", default="32,64,128,64,32", help="the batch size or sequence length of each call")
    args = p.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    module = importlib.import_module(args.model)
    largest = max(sizes)
    if args.vary == "batch":
        model, inputs = module.build(batch=largest, small=args.small, seed=args.seed)
    else:
        model, inputs = module.build(batch=args.batch, small=args.small, seed=args.seed, seq=largest)

    def inputs_for(step):
        n = sizes[step]
        dim = 0 if args.vary == "batch" else 1
        return tuple(x.narrow(dim, 0, min(n, x.shape[dim])).contiguous() if isinstance(x, torch.Tensor) else x
                     for x in inputs)

    if args.threads:
        torch.set_num_threads(args.threads)
    run(f"{args.model}, {args.vary} {args.sizes}", model, inputs_for, len(sizes), args.time)


if __name__ == "__main__":
    main()
