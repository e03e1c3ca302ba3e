"""A language model whose recurrence is a Python loop over time steps of an
nn.LSTMCell (the MagPy paper's Figure 18): the loop rolls into a loop
region of the graph, so one dynamic record serves every sequence length.

    magpy-capture examples/models/lstm_loop.py [--lengths 8,16,8,32] [--batch N] [--small]
"""
import torch
import torch.nn as nn

from common import options, run


class LoopLM(nn.Module):
    def __init__(self, vocab=1000, embed=256, hidden=512, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        sizes = [embed] + [hidden] * layers
        self.cells = nn.ModuleList(nn.LSTMCell(i, o) for i, o in zip(sizes[:-1], sizes[1:]))
        self.decoder = nn.Linear(hidden, vocab)
        self.hidden = hidden

    def init_state(self, batch: int, like: torch.Tensor):  # annotated for torch.jit.script (bench/figure18.py)
        zeros = like.new_zeros(batch, self.hidden)
        return [(zeros, zeros) for _ in self.cells]

    def forward(self, tokens):
        batch, steps = tokens.shape
        x = self.embed(tokens)
        state = self.init_state(batch, x)
        logits = []
        for t in range(steps):
            h = x[:, t]
            for i, cell in enumerate(self.cells):
                state[i] = cell(h, state[i])
                h = state[i][0]
            logits.append(self.decoder(h))
        return torch.stack(logits, dim=1), state


def build(batch=1, small=False, seed=0, layers=2, hidden=512):
    torch.manual_seed(seed)
    model = LoopLM(vocab=50, embed=16, hidden=32, layers=2) if small else LoopLM(hidden=hidden, layers=layers)
    return model.eval(), model.embed.num_embeddings


def main():
    p = options(__doc__)
    p.add_argument("--lengths", default="8,16,8,32,16", help="the sequence length of each call")
    p.add_argument("--layers", type=int, default=2, help="LSTM cells stacked (the paper's Figure 18: 10)")
    p.add_argument("--hidden", type=int, default=512, help="hidden size (Figure 18: 256)")
    args = p.parse_args()
    lengths = [int(n) for n in args.lengths.split(",")]
    model, vocab = build(args.batch, args.small, args.seed, args.layers, args.hidden)

    def inputs_for(step):
        torch.manual_seed(step)
        return (torch.randint(0, vocab, (args.batch, lengths[step])),)

    if args.threads:
        torch.set_num_threads(args.threads)
    run(f"lstm_loop, lengths {args.lengths}", model, inputs_for, len(lengths), args.time)


if __name__ == "__main__":
    main()
