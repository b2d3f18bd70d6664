"""The `jointgraph` command: arguments, errors (exit code 2), and a real tiny bench with its JSON."""

import json
import textwrap

import pytest

from jointgraph.cli import build_parser, main

TINY = ["--layers", "1", "--width", "16", "--batch", "2", "--seq", "4"]


def test_parse_bench_arguments():
    args = build_parser().parse_args(["bench", "gpt", "--layers", "3", "--batch", "8", "--seq", "64", "--budget",
                                      "0.6", "--repeat", "2", "--json", "out.json", "--report", "r.html"])
    assert (args.command, args.model, args.layers, args.batch, args.seq) == ("bench", "gpt", 3, 8, 64)
    assert args.budget == 0.6 and args.repeat == 2 and args.json == "out.json" and args.report == "r.html"
    assert args.partitioner is None and args.dtype == "float32"
    assert build_parser().parse_args(["bench", "mlp", "--budget", "2e9"]).budget == 2_000_000_000


@pytest.mark.parametrize("argv, message", [
    (["bench", "resnet9000"], "unknown model 'resnet9000'"),
    (["explain", "no_such_module_xyz:build"], "cannot import 'no_such_module_xyz'"),
    (["bench", "mlp", "--budget", "1.5"], "memory_budget"),
    (["bench", "mlp", "--partitioner", "default", "--budget", "0.5"], "--budget needs --partitioner budget"),
    (["report", "mlp", "--partitioner", "budget"], "--partitioner budget needs --budget"),
    (["bench", "mlp", "--device", "tpu"], "use cpu or cuda"),
    (["bench", "mlp", "--layers", "0"], "positive integer"),
    (["bench", "mlp", "--partitioner", "greedy"], "invalid choice"),
    (["frobnicate", "mlp"], "invalid choice"),
    (["bench", "mlp", "--nproc", "2"], "--nproc runs the language models"),
])
def test_bad_arguments_exit_2_with_a_clear_message(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_bench_mlp_writes_real_figures(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "mlp", *TINY, "--repeat", "2", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    errors = [c["error"] for c in json.loads(path.read_text())["contenders"]]
    assert "jointgraph mincut" in out and "vs torch.compile aot_eager" in out, errors
    data = json.loads(path.read_text())
    assert data["schema"] == "jointgraph.bench/1"
    assert data["options"]["model"] == "mlp" and data["options"]["repeat"] == 2
    assert data["machine"]["cpu_count"] >= 1 and data["machine"]["platform"]
    assert data["versions"]["torch"]
    kinds = [c["kind"] for c in data["contenders"]]
    assert kinds == ["eager", "torch.compile", "jointgraph"]
    for c in data["contenders"]:
        assert c["error"] is None, c
        assert c["measured_peak_bytes"] > 0 and c["saved_bytes_measured"] > 0
        assert c["step_seconds"] > 0 and len(c["step_seconds_all"]) == 2
        assert c["max_grad_diff"] < 1e-5
        # the live-memory curve of the measured step (Note [Eager's memory curve]): its peak is the
        # measured peak, it starts at the bytes live before the step, the forward ends holding what it saved
        curve = c["memory_curve"]
        values = [b for _, b in curve["forward"] + curve["backward"]]
        assert max(values) == c["measured_peak_bytes"]
        assert curve["forward"][0][0] == 0.0 and curve["forward"][-1][1] - curve["forward"][0][1] == \
            c["saved_bytes_measured"]
        for phase in ("forward", "backward"):
            fractions = [f for f, _ in curve[phase]]
            assert fractions == sorted(fractions) and 0 <= fractions[0] and fractions[-1] <= 1
    ours = data["contenders"][-1]
    assert ours["saved_bytes_planned"] > 0 and ours["compile_seconds"] >= 0
    assert data["references"] == ["torch.compile aot_eager"]
    ratios = data["ratios"]["jointgraph mincut vs torch.compile aot_eager"]
    assert set(ratios) >= {"measured_peak_bytes", "step_seconds"} and ratios["measured_peak_bytes"] > 0


def test_explain_prints_saved_names(capsys):
    import jointgraph
    from jointgraph.bench import ZooShape, build_workload

    work = build_workload("mlp", ZooShape(layers=1, width=16, batch=2, seq=4))
    plan = jointgraph.plan(work.step, *work.inputs)
    assert main(["explain", "mlp", *TINY, "--all"]) == 0
    out = capsys.readouterr().out
    assert plan.saved and all(s.name in out for s in plan.saved)


def test_user_model_spec(tmp_path, monkeypatch, capsys):
    (tmp_path / "my_models_for_cli.py").write_text(textwrap.dedent("""
        import torch

        def build():
            model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Tanh())
            return model, (torch.randn(3, 8),), lambda out: out.sum()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["explain", "my_models_for_cli:build"]) == 0
    assert "values saved for the backward" in capsys.readouterr().out


def test_saved_tensors_choices_map_to_policies():
    from jointgraph.bench import SAVED_TENSORS, saved_tensor_policy

    assert build_parser().parse_args(["bench", "gpt", "--saved-tensors", "bf16+offload"]).saved_tensors == \
        "bf16+offload"
    policies = {spec: saved_tensor_policy(spec) for spec in SAVED_TENSORS}
    assert [(p.compress, p.offload) for p in policies.values()] == [
        ("bf16", False), ("fp8", False), (None, True), ("bf16", True), ("fp8", True)]


def test_pareto_on_bench_needs_a_report(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "mlp", *TINY, "--pareto"])
    assert exit_info.value.code == 2 and "--report" in capsys.readouterr().err


def test_bench_with_budget_and_saved_tensors_end_to_end(tmp_path, capsys):
    path, report = tmp_path / "bench.json", tmp_path / "bench.html"
    tiny_gpt = ["--layers", "1", "--width", "32", "--batch", "2", "--seq", "64"]
    assert main(["bench", "gpt", *tiny_gpt, "--repeat", "1", "--budget", "0.9", "--saved-tensors", "bf16",
                 "--json", str(path), "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "jointgraph budget 0.9 saved=bf16" in out and "torch.compile min-cut budget=0.9" in out
    data = json.loads(path.read_text())
    assert [c["name"] for c in data["contenders"]] == [
        "eager", "torch.compile aot_eager", "torch.compile min-cut budget=0.9", "jointgraph budget 0.9 saved=bf16"]
    ours = data["contenders"][-1]
    assert ours["error"] is None and ours["max_grad_diff"] < 1e-1
    assert 0 < data["budget_bytes"] and ours["simulated_peak_bytes"] > 0
    # a budget this model can reach (its minimum is ~0.87 of the default peak): kept, no warning
    assert ours["simulated_peak_bytes"] <= data["budget_bytes"] and "below the minimum" not in out
    # met measured too: on CPU the measured peak is the simulated one (within bytes), ~2% below the budget
    assert data["budget_met"]["jointgraph budget 0.9 saved=bf16"] == {"simulated": True, "measured": True}
    assert "jointgraph budget 0.9 saved=bf16: simulated peak" in out and "within it" in out
    page = report.read_text(encoding="utf-8")
    assert "<tr><th>memory budget</th>" in page and "the dashed line is the budget" in page
    assert "the purple curve is eager's live memory, measured by the bench" in page


### User failures: one message, the right exit code, no traceback (issue 17)

def _user_models(tmp_path, monkeypatch):
    (tmp_path / "cli_failing_models.py").write_text(textwrap.dedent("""
        import torch

        def frozen():
            model = torch.nn.Linear(8, 8).requires_grad_(False)
            return model, (torch.randn(3, 8),), lambda out: out.sum()

        class Broken(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                return self.fc(x) @ torch.ones(3, 3)   # wrong shapes: eager raises

        def broken():
            return Broken(), (torch.randn(3, 8),), lambda out: out.sum()

        class Unsupported(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                y = self.fc(x)
                if y.sum() > 0:   # a Python branch on a tensor's value
                    return y.sum() * 2
                return y.sum()

        def unsupported():
            return Unsupported(), (torch.randn(3, 8),), lambda out: out

        class Resized(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(8, 8)

            def forward(self, x):
                x.resize_(32)   # eager grows the input's storage
                return self.fc(x.view(4, 8))

        def resized():
            return Resized(), (torch.randn(3, 8),), lambda out: out.sum()

        def raises_while_building():
            raise RuntimeError("checkpoint file is missing")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("argv, code, message", [
    (["explain", "cli_failing_models:frozen"], 1, "does not train"),
    (["explain", "cli_failing_models:broken"], 1, "the model failed: RuntimeError"),
    (["explain", "cli_failing_models:unsupported"], 1, "data-dependent Python control flow"),
    (["explain", "cli_failing_models:resized"], 1, "resize_() to (32,) grows the storage"),
    (["explain", "cli_failing_models:raises_while_building"], 1,
     "building the model cli_failing_models:raises_while_building failed: RuntimeError: checkpoint file is missing"),
    (["explain", "gpt", "--layers", "1", "--width", "32", "--batch", "2", "--seq", "16", "--budget", "0.1"], 1,
     "below the minimum achievable peak"),
])
def test_model_failures_exit_1_with_one_message(argv, code, message, tmp_path, monkeypatch, capsys):
    _user_models(tmp_path, monkeypatch)
    assert main(argv) == code
    captured = capsys.readouterr()
    assert message in captured.err
    assert "Traceback" not in captured.err + captured.out
    assert "--debug" in captured.err


def test_debug_shows_the_traceback(tmp_path, monkeypatch):
    _user_models(tmp_path, monkeypatch)
    with pytest.raises(RuntimeError):
        main(["explain", "cli_failing_models:broken", "--debug"])


@pytest.mark.parametrize("argv, message", [
    (["bench", "mlp", *TINY, "--json", "/nonexistent-dir-xyz/x.json"], "--json /nonexistent-dir-xyz/x.json: the"),
    (["report", "mlp", *TINY, "-o", "/nonexistent-dir-xyz/r.html"], "does not exist"),
    (["report", "mlp", *TINY, "-o", "/proc/r.html"], "--output /proc/r.html: cannot be written"),   # root too
    (["bench", "mlp", *TINY, "--report", "/proc/r.html"], "--report /proc/r.html: cannot be written"),
    (["explain", "no-such-model"], "unknown model 'no-such-model'"),
    (["explain", "mlp", "--budget", "1.5"], "a float must lie in (0, 1]"),
    (["explain", "mlp", "--partitioner", "budget"], "--partitioner budget needs --budget"),
    (["explain", "cli_no_such_module_xyz:build"], "cannot import 'cli_no_such_module_xyz'"),
    (["cache", "info", "--dir", "/nonexistent-dir-xyz/cache"], "--dir /nonexistent-dir-xyz/cache: no such directory"),
    (["cache", "clear", "--dir", __file__], "is a file, not a cache directory"),
    (["bench", "mlp", "--budgett", "0.5"], "did you mean: --budgett -> --budget"),
    (["bnech", "mlp"], "did you mean 'bench'?"),
    (["bench", "mlp", "--partitioner", "mincutt"], "did you mean 'mincut'?"),
    (["bench", "mlp", "--budget", "2 parsecs"], "not a memory size"),
])
def test_bad_paths_and_typos_exit_2_before_running(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("text, expected", [("0.6", 0.6), ("2GiB", 2 * 2**30), ("1500MB", 1_500_000_000),
                                            ("1500MiB", 1500 * 2**20), ("123456", 123456), ("2e9", 2_000_000_000)])
def test_budget_units(text, expected):
    value = build_parser().parse_args(["bench", "mlp", "--budget", text]).budget
    assert value == expected and type(value) is type(expected)


def test_version_and_python_m(capsys):
    import subprocess
    import sys

    import jointgraph

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0 and f"jointgraph {jointgraph.__version__}" in capsys.readouterr().out
    done = subprocess.run([sys.executable, "-m", "jointgraph", "--version"], capture_output=True, text=True,
                          env={**__import__("os").environ, "PYTHONPATH": str(__import__("pathlib").Path(
                              jointgraph.__file__).parent.parent)})
    assert done.returncode == 0 and done.stdout.startswith("jointgraph ")


def test_offload_on_cpu_says_host_memory_is_the_same(capsys):
    assert main(["explain", "mlp", *TINY, "--saved-tensors", "offload", "--device", "cpu"]) == 0
    assert "host memory is the same memory" in capsys.readouterr().err


def test_cache_info_on_an_empty_or_absent_directory(tmp_path, monkeypatch, capsys):
    assert main(["cache", "info", "--dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"cache directory: {tmp_path}" in out and "entries: 0, 0 bytes" in out and "no runs recorded yet" in out
    monkeypatch.setenv("JOINTGRAPH_CACHE_DIR", str(tmp_path / "never-made"))
    assert main(["cache", "info"]) == 0
    assert "no cache yet" in capsys.readouterr().out
    assert not (tmp_path / "never-made").exists()


def test_output_checks_leave_no_file_behind(tmp_path):
    from jointgraph.cli import _check_writable

    _check_writable("--json", str(tmp_path / "x.json"))
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "kept.json").write_text("old")
    _check_writable("--json", str(tmp_path / "kept.json"))
    assert (tmp_path / "kept.json").read_text() == "old"
