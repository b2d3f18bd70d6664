"""Real models: Hugging Face transformers (random weights, small configs) and a transformer block
through torch.compile(backend="jointgraph"), eager PyTorch as the oracle."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn

import jointgraph

transformers = pytest.importorskip("transformers")


def _hf_model(name: str) -> tuple[nn.Module, dict]:
    vocab, seq, batch = 128, 16, 2
    ids = torch.randint(0, vocab, (batch, seq))
    if name == "gpt2":
        config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=vocab, n_positions=64,
                                         resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        model = transformers.GPT2LMHeadModel(config)
    elif name == "llama":
        config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                          num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                          max_position_embeddings=64)
        model = transformers.LlamaForCausalLM(config)
    else:
        config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, intermediate_size=128,
                                         num_attention_heads=4, vocab_size=vocab, max_position_embeddings=64,
                                         hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        model = transformers.BertForMaskedLM(config)
    return model.train(), {"input_ids": ids, "labels": ids.clone()}


def _step(model, inputs, params_of=None) -> tuple[torch.Tensor, dict]:
    loss = model(**inputs).loss
    loss.backward()
    owner = params_of if params_of is not None else model
    grads = {n: p.grad.detach().clone() for n, p in owner.named_parameters() if p.grad is not None}
    return loss.detach(), grads


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gpt2", "llama", "bert"])
def test_hf_model_training_step_matches_eager(name):
    torch._dynamo.reset()
    model, inputs = _hf_model(name)
    twin = copy.deepcopy(model)
    loss_e, grads_e = _step(model, inputs)
    loss_c, grads_c = _step(torch.compile(twin, backend="jointgraph"), inputs, params_of=twin)
    torch.testing.assert_close(loss_c, loss_e, atol=1e-5, rtol=1e-5)
    assert grads_c.keys() == grads_e.keys() and grads_e
    for name_, grad in grads_e.items():
        torch.testing.assert_close(grads_c[name_], grad, atol=1e-5, rtol=1e-4, msg=name_)


def test_transformer_block_with_changing_sequence_lengths():
    torch._dynamo.reset()
    compiled_graphs = []
    inner = jointgraph.backend(partitioner="default")

    def recording_backend(gm, example_inputs):
        compiled_graphs.append([type(x) for x in example_inputs])
        return inner(gm, example_inputs)

    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    twin = copy.deepcopy(layer)
    compiled = torch.compile(twin, backend=recording_backend)
    for seq in (8, 12, 16, 20):
        x = torch.randn(2, seq, 32)
        out_e, out_c = layer(x), compiled(x)
        torch.testing.assert_close(out_c, out_e, atol=1e-5, rtol=1e-5)
        grad = torch.randn_like(out_e)
        out_e.backward(grad)
        out_c.backward(grad)
        for p_e, p_c in zip(layer.parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(p_c.grad, p_e.grad, atol=1e-5, rtol=1e-4)
        layer.zero_grad(), twin.zero_grad()
    # The second shape arrives with symbolic sizes and is compiled once for all later lengths.
    assert len(compiled_graphs) == 2
    assert any(t is torch.SymInt for t in compiled_graphs[1])


def test_backend_registered_by_name_through_entry_point():
    from importlib.metadata import entry_points

    names = {ep.name: ep.value for ep in entry_points(group="torch_dynamo_backends")}
    assert names.get("jointgraph") == "jointgraph.dynamo:jointgraph_backend"
    assert "jointgraph" in torch._dynamo.list_backends()


@pytest.mark.parametrize("options", [{"partitioner": "mincut"}, {"partitioner": "budget", "memory_budget": 0.7}],
                         ids=["mincut", "budget"])
def test_symbolic_sizes_with_memory_planning(options):
    torch._dynamo.reset()
    layer = nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
    twin = copy.deepcopy(layer)
    compiled = torch.compile(twin, backend=jointgraph.backend(**options))
    for seq in (8, 12, 16):   # the second length arrives with symbolic sizes
        x = torch.randn(2, seq, 32)
        layer(x).sum().backward()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")   # a budget below this tiny model's reach warns
            compiled(x).sum().backward()
        for p_e, p_c in zip(layer.parameters(), twin.parameters(), strict=True):
            torch.testing.assert_close(p_c.grad, p_e.grad, atol=1e-5, rtol=1e-4)
        layer.zero_grad(), twin.zero_grad()
