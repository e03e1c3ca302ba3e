"""One model of the torchvision / torchaudio zoo, compiled with magpy and
compared with eager: bench/zoo.py runs this under magpy-capture.

    magpy-capture -o m.mgp bench/zoo_model.py resnet18

Builds the model with random weights (seeded) in eval mode at a small
input size, then calls the compiled model on two different inputs and on
each again (the last runs a compiled graph where the JIT makes one),
comparing each result with eager's. Prints one line,
MAGPY_ZOO {json}: whether every result was equal, the first (monitored)
call's time and an eager call's time. python3 runs it too (with python/ on
sys.path magpy.compile is the identity).
"""
import json
import os
import sys
import time

import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path[:0] = [os.path.join(ROOT, "examples", "models"), os.path.join(ROOT, "python")]
from common import assert_same  # noqa: E402

import magpy  # noqa: E402


def image(*shape):
    return lambda g: (torch.randn(*shape, generator=g),)


def images(n, size):
    return lambda g: ([torch.rand(3, size, size, generator=g) for _ in range(n)],)


def audio(batch, samples):
    return lambda g: (torch.randn(batch, samples, generator=g),)


def tv(builder, inputs, **kwargs):
    def build():
        import torchvision.models as tvm
        module = tvm
        for part in builder.split(".")[:-1]:
            module = getattr(module, part)
        return getattr(module, builder.split(".")[-1])(weights=None, **kwargs)
    return build, inputs


def ta(builder, inputs, **kwargs):
    def build():
        import torchaudio.models as tam
        return getattr(tam, builder)(**kwargs)
    return build, inputs


def small_vit():
    from torchvision.models.vision_transformer import VisionTransformer
    return VisionTransformer(image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=64, mlp_dim=128)


def conformer_inputs(g):
    return torch.randn(2, 20, 32, generator=g), torch.tensor([20, 15])


def emformer_inputs(g):
    return torch.randn(1, 16 + 4, 32, generator=g), torch.tensor([20])


def tacotron_inputs(g):
    tokens = torch.randint(1, 30, (1, 12), generator=g)
    mel = torch.randn(1, 80, 16, generator=g)
    return tokens, torch.tensor([12]), mel, torch.tensor([16])


def raft_inputs(g):
    return torch.randn(1, 3, 128, 128, generator=g), torch.randn(1, 3, 128, 128, generator=g), 2  # flow updates


NO_BACKBONE = {"weights_backbone": None}
DETECTION = {**NO_BACKBONE, "min_size": 128, "max_size": 160}

# name -> (builder, inputs(generator) -> tuple of arguments)
MODELS = {
    # Classification.
    "alexnet": tv("alexnet", image(1, 3, 64, 64)),
    "vgg11_bn": tv("vgg11_bn", image(1, 3, 32, 32)),
    "resnet18": tv("resnet18", image(1, 3, 64, 64)),
    "resnet50": tv("resnet50", image(1, 3, 64, 64)),
    "resnext50_32x4d": tv("resnext50_32x4d", image(1, 3, 64, 64)),
    "wide_resnet50_2": tv("wide_resnet50_2", image(1, 3, 64, 64)),
    "densenet121": tv("densenet121", image(1, 3, 64, 64)),
    "squeezenet1_1": tv("squeezenet1_1", image(1, 3, 64, 64)),
    "mobilenet_v2": tv("mobilenet_v2", image(1, 3, 64, 64)),
    "mobilenet_v3_small": tv("mobilenet_v3_small", image(1, 3, 64, 64)),
    "mobilenet_v3_large": tv("mobilenet_v3_large", image(1, 3, 64, 64)),
    "shufflenet_v2_x0_5": tv("shufflenet_v2_x0_5", image(1, 3, 64, 64)),
    "mnasnet0_5": tv("mnasnet0_5", image(1, 3, 64, 64)),
    "efficientnet_b0": tv("efficientnet_b0", image(1, 3, 64, 64)),
    "efficientnet_v2_s": tv("efficientnet_v2_s", image(1, 3, 64, 64)),
    "regnet_y_400mf": tv("regnet_y_400mf", image(1, 3, 64, 64)),
    "regnet_x_400mf": tv("regnet_x_400mf", image(1, 3, 64, 64)),
    "convnext_tiny": tv("convnext_tiny", image(1, 3, 64, 64)),
    "vit_small": (small_vit, image(1, 3, 32, 32)),
    "swin_t": tv("swin_t", image(1, 3, 64, 64)),
    "swin_v2_t": tv("swin_v2_t", image(1, 3, 64, 64)),
    "maxvit_t": tv("maxvit_t", image(1, 3, 224, 224)),
    "googlenet": tv("googlenet", image(1, 3, 64, 64), init_weights=False, aux_logits=False),
    "inception_v3": tv("inception_v3", image(1, 3, 96, 96), init_weights=False, aux_logits=False),
    # Segmentation.
    "fcn_resnet50": tv("segmentation.fcn_resnet50", image(1, 3, 64, 64), **NO_BACKBONE),
    "deeplabv3_mobilenet_v3_large": tv("segmentation.deeplabv3_mobilenet_v3_large", image(1, 3, 64, 64),
                                       **NO_BACKBONE),
    "lraspp_mobilenet_v3_large": tv("segmentation.lraspp_mobilenet_v3_large", image(1, 3, 64, 64), **NO_BACKBONE),
    # Detection: data-dependent post-processing.
    "fasterrcnn_mobilenet_v3_large_320_fpn": tv("detection.fasterrcnn_mobilenet_v3_large_320_fpn", images(1, 96),
                                                **DETECTION),
    "maskrcnn_resnet50_fpn": tv("detection.maskrcnn_resnet50_fpn", images(1, 96), **DETECTION),
    "keypointrcnn_resnet50_fpn": tv("detection.keypointrcnn_resnet50_fpn", images(1, 96), **DETECTION),
    "retinanet_resnet50_fpn": tv("detection.retinanet_resnet50_fpn", images(1, 96), **DETECTION),
    "fcos_resnet50_fpn": tv("detection.fcos_resnet50_fpn", images(1, 96), **DETECTION),
    "ssdlite320_mobilenet_v3_large": tv("detection.ssdlite320_mobilenet_v3_large", images(1, 96), **NO_BACKBONE),
    # Video and optical flow.
    "r3d_18": tv("video.r3d_18", image(1, 3, 4, 32, 32)),
    "r2plus1d_18": tv("video.r2plus1d_18", image(1, 3, 4, 32, 32)),
    "mvit_v1_b": tv("video.mvit_v1_b", image(1, 3, 16, 224, 224)),
    "raft_small": tv("optical_flow.raft_small", raft_inputs),
    # torchaudio.
    "wav2vec2_base": ta("wav2vec2_base", audio(1, 4000)),
    "hubert_base": ta("hubert_base", audio(1, 4000)),
    "wav2letter": ta("Wav2Letter", audio(1, 4000), num_classes=10, input_type="waveform"),
    "deepspeech": ta("DeepSpeech", image(1, 1, 20, 40), n_feature=40, n_class=10),
    "conv_tasnet": ta("ConvTasNet", image(1, 1, 800), num_sources=2, enc_num_feats=32, msk_num_feats=16,
                      msk_num_hidden_feats=32, msk_num_layers=2, msk_num_stacks=1),
    "conformer": ta("Conformer", conformer_inputs, input_dim=32, num_heads=2, ffn_dim=64, num_layers=2,
                    depthwise_conv_kernel_size=3),
    "emformer": ta("Emformer", emformer_inputs, input_dim=32, num_heads=2, ffn_dim=64, num_layers=2,
                   segment_length=4, right_context_length=4),
    "wavernn": ta("WaveRNN", lambda g: (torch.randn(1, 1, (12 - 5 + 1) * 256, generator=g).clamp(-1, 1),
                                        torch.randn(1, 1, 128, 12, generator=g)),
                  upsample_scales=[4, 4, 16], n_classes=256, hop_length=256, n_freq=128),
    "tacotron2": ta("Tacotron2", tacotron_inputs, n_symbol=30),
    "hdemucs_low": ta("hdemucs_low", image(1, 2, 4096), sources=["drums", "bass"]),
}

# A few small models for the test suite (Zoo.SubsetIsWholeAndEqualToEager):
# a classic CNN, one with squeeze-excitation and hardswish, two
# transformers (fused attention, torch._assert, masks filled from Python
# numbers) and an audio model.
CI_SUBSET = ["squeezenet1_1", "mobilenet_v3_small", "vit_small", "swin_t", "wav2letter"]


def main():
    name = sys.argv[1]
    builder, inputs = MODELS[name]
    torch.manual_seed(0)
    model = builder().eval()
    compiled = magpy.compile(model)
    g = torch.Generator().manual_seed(1)
    # Two inputs, then each again: the JIT checks a record's compiled graph
    # on its third call without autograd and runs it on the fourth
    # (magpy-capture --backend, --freeze-state).
    calls = [inputs(g), inputs(g)]
    calls += [calls[0], calls[1], calls[0]]
    equal, first_s, eager_s, error = True, None, None, ""
    with torch.no_grad():
        for i, args in enumerate(calls):
            # The same random numbers for both (Tacotron2's prenet drops out in eval mode too).
            torch.manual_seed(100 + i)
            t0 = time.perf_counter()
            got = compiled(*args)
            t1 = time.perf_counter()
            torch.manual_seed(100 + i)
            want = model(*args)
            t2 = time.perf_counter()
            if i == 0:
                first_s = t1 - t0
            if i == 1:
                eager_s = t2 - t1
            try:
                assert_same(got, want, f"{name}, call {i}")
            except AssertionError as e:
                equal, error = False, str(e).splitlines()[0]
    stats = compiled._magpy_stats() if hasattr(compiled, "_magpy_stats") else {}
    print("MAGPY_ZOO " + json.dumps({"model": name, "jit_equal": equal, "first_call_s": first_s,
                                     "eager_s": eager_s, "jit_compiled_calls": stats.get("compiled", 0),
                                     "error": error}))


if __name__ == "__main__":
    main()
