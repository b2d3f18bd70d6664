"""Hugging Face transformers models through aot_module and torch.compile(backend="jointgraph"), with
padding attention masks: tiny configs (2 layers, hidden 32), random weights, no downloads, train mode
with dropout 0. Eager PyTorch is the oracle for the loss and every parameter gradient."""

import copy

import pytest
import torch

import jointgraph

transformers = pytest.importorskip("transformers")

VOCAB, BATCH, SEQ = 64, 2, 8
DECODER = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
               num_key_value_heads=2, max_position_embeddings=32, vocab_size=VOCAB)
ENCODER = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4,
               max_position_embeddings=40, vocab_size=VOCAB, hidden_dropout_prob=0.0,
               attention_probs_dropout_prob=0.0)
SEQ2SEQ = dict(encoder_layers=2, decoder_layers=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64,
               encoder_attention_heads=4, decoder_attention_heads=4, dropout=0.0, attention_dropout=0.0,
               activation_dropout=0.0, vocab_size=VOCAB)


def _padding_mask() -> torch.Tensor:
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, -3:] = 0   # the second sequence is 3 tokens shorter
    return mask


def _tokens() -> torch.Tensor:
    return torch.randint(3, VOCAB, (BATCH, SEQ))


def _labels(mask: torch.Tensor) -> torch.Tensor:
    labels = _tokens()
    labels[mask == 0] = -100
    return labels


def _model(name: str) -> tuple[torch.nn.Module, dict]:
    """A tiny model and one batch with a padding mask (the loss ignores the padded positions)."""
    tf = transformers
    ids, mask = _tokens(), _padding_mask()
    text = {"input_ids": ids, "attention_mask": mask, "labels": _labels(mask)}
    if name == "gpt2":
        config = tf.GPT2Config(n_layer=2, n_embd=32, n_head=4, n_positions=32, vocab_size=VOCAB, resid_pdrop=0.0,
                               embd_pdrop=0.0, attn_pdrop=0.0)
        return tf.GPT2LMHeadModel(config), text
    if name == "llama":
        return tf.LlamaForCausalLM(tf.LlamaConfig(**DECODER)), text
    if name == "qwen2":
        return tf.Qwen2ForCausalLM(tf.Qwen2Config(**DECODER)), text
    if name == "mixtral":
        config = tf.MixtralConfig(**DECODER, num_local_experts=4, num_experts_per_tok=2)
        return tf.MixtralForCausalLM(config), text
    if name == "opt":
        config = tf.OPTConfig(num_hidden_layers=2, hidden_size=32, ffn_dim=64, num_attention_heads=4,
                              word_embed_proj_dim=32, max_position_embeddings=32, vocab_size=VOCAB, dropout=0.0,
                              attention_dropout=0.0)
        return tf.OPTForCausalLM(config), text
    if name == "bert":
        return tf.BertForMaskedLM(tf.BertConfig(**ENCODER)), text
    if name == "roberta":
        return tf.RobertaForMaskedLM(tf.RobertaConfig(**ENCODER)), text
    if name == "t5":
        config = tf.T5Config(num_layers=2, num_decoder_layers=2, d_model=32, d_kv=8, d_ff=64, num_heads=4,
                             dropout_rate=0.0, decoder_start_token_id=0, vocab_size=VOCAB)
        return tf.T5ForConditionalGeneration(config), text
    if name == "bart":
        config = tf.BartConfig(**SEQ2SEQ, max_position_embeddings=32)
        return tf.BartForConditionalGeneration(config), text
    if name == "whisper":
        config = tf.WhisperConfig(**SEQ2SEQ, num_mel_bins=8, max_source_positions=8, max_target_positions=32,
                                  decoder_start_token_id=1, pad_token_id=0)
        audio = {"input_features": torch.randn(BATCH, 8, 16), "decoder_input_ids": ids,
                 "decoder_attention_mask": mask, "labels": _labels(mask)}
        return tf.WhisperForConditionalGeneration(config), audio
    raise KeyError(name)


def _step(call, inputs: dict, model: torch.nn.Module) -> tuple[torch.Tensor, dict]:
    model.zero_grad(set_to_none=True)
    loss = call(**inputs).loss
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_same_step(expected: tuple, actual: tuple) -> None:
    (loss_e, grads_e), (loss_c, grads_c) = expected, actual
    torch.testing.assert_close(loss_c, loss_e, atol=1e-5, rtol=1e-4)
    assert grads_c.keys() == grads_e.keys() and grads_e
    for name, grad in grads_e.items():
        torch.testing.assert_close(grads_c[name], grad, atol=1e-5, rtol=1e-4, msg=name)


ALL = ["gpt2", "llama", "qwen2", "mixtral", "opt", "bert", "roberta", "t5", "bart", "whisper"]


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
def test_aot_module_with_padding_mask_matches_eager(name):
    model, inputs = _model(name)
    model.train()
    twin = copy.deepcopy(model)
    compiled = jointgraph.aot_module(twin)
    _assert_same_step(_step(model, inputs, model), _step(compiled, inputs, twin))
    assert len(compiled._compiled.entries) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["llama", "bert"])
def test_torch_compile_with_padding_mask_matches_eager(name):
    torch._dynamo.reset()
    model, inputs = _model(name)
    model.train()
    twin = copy.deepcopy(model)
    _assert_same_step(_step(model, inputs, model), _step(torch.compile(twin, backend="jointgraph"), inputs, twin))


@pytest.mark.slow
def test_aot_module_trains_for_three_steps_like_eager():
    model, inputs = _model("llama")
    twin = copy.deepcopy(model)
    compiled = jointgraph.aot_module(twin)
    opt_e = torch.optim.AdamW(model.parameters(), lr=1e-2)
    opt_c = torch.optim.AdamW(twin.parameters(), lr=1e-2)
    for _ in range(3):
        _assert_same_step(_step(model, inputs, model), _step(compiled, inputs, twin))
        opt_e.step()
        opt_c.step()
    assert len(compiled._compiled.entries) == 1
