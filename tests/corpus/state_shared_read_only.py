# Two compiled modules share an embedding table and a config object that
# neither writes (an encoder and a decoder with tied weights). The record
# file keeps a copy of each in each function's state; copies nothing
# writes agree, so every call replays natively, also after the script
# changes the shared table and config between calls.
import torch

import magpy

torch.manual_seed(0)


class Config:
    scale = 2.0


class Encoder(torch.nn.Module):
    def __init__(self, embed, config):
        super().__init__()
        self.embed, self.config = embed, config

    def forward(self, ids):
        return self.embed(ids).sum(1) * self.config.scale


class Decoder(torch.nn.Module):
    def __init__(self, embed, config):
        super().__init__()
        self.embed, self.config = embed, config

    def forward(self, h):
        return h @ self.embed.weight.t() / self.config.scale


embed, config = torch.nn.Embedding(10, 4), Config()
enc, dec = Encoder(embed, config), Decoder(embed, config)
cenc, cdec = magpy.compile(enc), magpy.compile(dec)
ids = torch.tensor([[1, 2, 3]])
with torch.no_grad():
    for i in range(4):
        assert torch.allclose(cdec(cenc(ids)), dec(enc(ids)))
        embed.weight.mul_(0.5)  # the script steps the shared table in place
        config.scale += 1
print("ok")
