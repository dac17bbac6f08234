import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.profiles import SETTINGS, Profile, build, profile_table
from pytest_llmperf.profiles_file import load_profiles


def write(tmp_path, text):
    path = tmp_path / "profiles.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_extends_inherits_extends_args_merges_env_and_replaces_lists(tmp_path):
    path = write(
        tmp_path,
        """
        [profiles.base]
        engine = "sglang"
        model = "/m"
        args = ["--tp-size", "8"]
        env = { NCCL_PROTO = "LL", A = "1" }
        concurrency = [1, 2]
        output_len = 500

        [profiles.spec]
        extends = "base"
        extra_args = ["--speculative-algorithm", "EAGLE3"]
        env = { A = "2" }
        concurrency = [4]
    """,
    )
    profiles = load_profiles(path).profiles
    base, spec = profiles["base"], profiles["spec"]
    assert spec.args == ("--tp-size", "8", "--speculative-algorithm", "EAGLE3")
    assert dict(spec.env) == {"NCCL_PROTO": "LL", "A": "2"}
    assert spec.concurrency == (4,)
    assert spec.output_len == 500 and spec.engine == "sglang" and spec.extends == "base"
    assert spec.speculative and not base.speculative
    assert base.args == ("--tp-size", "8")


def test_a_speculative_profile_finds_its_base_along_extends_or_is_told(tmp_path):
    path = write(
        tmp_path,
        """
        [profiles.base]
        extra_body = { cache_prompt = false }
        [profiles.eagle3]
        extends = "base"
        extra_args = ["--speculative-algorithm", "EAGLE3"]
        extra_body = { top_k = 1 }
        [profiles.eagle3-deeper]
        extends = "eagle3"
        extra_args = ["--speculative-num-steps", "5"]
        [profiles.other-base]
        [profiles.eagle3-vs-other]
        extends = "eagle3"
        base_profile = "other-base"
    """,
    )
    profiles = load_profiles(path).profiles
    assert profiles["eagle3"].base_profile == "base"
    assert profiles["eagle3-deeper"].base_profile == "base"  # past the speculative parent
    assert profiles["eagle3-vs-other"].base_profile == "other-base"
    assert profiles["base"].base_profile is None
    assert dict(profiles["eagle3"].extra_body) == {
        "cache_prompt": False,
        "top_k": 1,
    }  # merged like env


def test_requests_per_run_is_four_times_concurrency_with_a_floor(tmp_path):
    profile = load_profiles(write(tmp_path, "[profiles.p]\nmin_requests = 16\n")).profiles["p"]
    assert [profile.requests_per_run(c) for c in (1, 4, 5, 250)] == [16, 16, 20, 1000]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "[profiles.p]\nconcurency = [1]\n",
            "profile 'p': unknown field 'concurency'. Did you mean 'concurrency'?",
        ),
        (
            "[profiles.p]\nconcurrency = [0, 2]\n",
            "profile 'p', field 'concurrency': got [0, 2]; expected a non-empty list",
        ),
        (
            '[profiles.p]\nengine = "vllm"\n',
            "field 'engine': got 'vllm'; expected one of 'command', 'llamacpp', 'remote', 'sglang', 'sim'",
        ),
        (
            '[profiles.p]\napi = "grpc"\n',
            "field 'api': got 'grpc'; expected one of 'sglang', 'openai'",
        ),
        ("[profiles.p]\nruns = 0\n", "field 'runs': got 0; expected a positive integer"),
        (
            '[profiles.p]\nargs = "--tp-size 8"\n',
            "field 'args': got '--tp-size 8'; expected a list of strings",
        ),
        (
            "[profiles.p]\nenv = { A = 1 }\n",
            "field 'env': got {'A': 1}; expected a table of string values",
        ),
        (
            "[profiles.p]\nfail_margin = 1.5\n",
            "field 'fail_margin': got 1.5; expected a fraction between 0 and 1",
        ),
        (
            "[profiles.p]\nwarn_margin = 0.2\nfail_margin = 0.1\n",
            "field 'warn_margin': 0.2 is larger than fail_margin",
        ),
        (
            '[profiles.p]\nextends = "nope"\n',
            "profile 'p', field 'extends': 'nope' is not a profile in this file",
        ),
        (
            '[profiles.a]\nextends = "b"\n[profiles.b]\nextends = "a"\n',
            "field 'extends': cycle a -> b -> a",
        ),
        (
            '[profiles.p]\nengine = "command"\n',
            "field 'command': got None; expected a non-empty list of strings",
        ),
        (
            '[profiles.p]\nengine = "command"\ncommand = ["srv", "--port", "{prt}"]\n',
            "unknown placeholder {prt} in '{prt}'; available: {host}, {port}, {model}, {python}, {run_dir}",
        ),
        (
            '[profiles.p]\ncommand = ["srv"]\n',
            "field 'command': only used with engine = \"command\"",
        ),
        (
            '[profiles.p]\nargs = ["--port", "30000"]\n',
            "field 'args': --port is set by the plugin (a free port on `host`",
        ),
        ("[profiles.p]\n[other]\n", "unknown top-level key(s) ['other']"),
        (
            'default = ["x"]\n[profiles.p]\n',
            "'default' names unknown profile 'x'. Available profiles: p.",
        ),
        ("[profiles.p\n", "not valid TOML"),
        (
            '[profiles.p]\nbase_profile = "q"\n[profiles.q]\n',
            "field 'base_profile': only a speculative profile",
        ),
        (
            '[profiles.p]\nargs = ["--speculative-algorithm", "EAGLE3"]\nbase_profile = "q"\n',
            "field 'base_profile': 'q' is not a profile in this file. Available profiles: p.",
        ),
        (
            '[profiles.p]\nargs = ["--speculative-algorithm", "EAGLE3"]\nbase_profile = "p"\n',
            "field 'base_profile': 'p' is speculative itself",
        ),
        (
            "[profiles.p]\nextra_body = 3\n",
            "field 'extra_body': got 3; expected a table of JSON fields",
        ),
        ("", "no profiles; define at least one [profiles.NAME] table"),
        (
            '[profiles.p]\nengine = "llamacpp"\nrouter = { workers = 2 }\n',
            "field 'router': SGLang's router routes to SGLang workers; this profile has engine = "
            "'llamacpp'",
        ),
        ("[profiles.p]\nrouter = {}\n", "field 'router': 'workers' is None; expected the number"),
        (
            '[profiles.p]\nrouter = { workers = 2, policy = "fastest" }\n',
            "field 'router': 'policy' is 'fastest'; expected one of 'random', 'round_robin'",
        ),
        (
            '[profiles.p]\nengine = "llamacpp"\nlauncher = "srun"\n',
            "field 'launcher': \"srun\" starts SGLang's ranks",
        ),
        ("[profiles.p]\nnodes = 2\n", "field 'nodes': only used with launcher = \"srun\""),
        (
            '[profiles.p]\nlauncher = "srun"\nargs = ["--nnodes", "2"]\n',
            "field 'args': --nnodes is set by the srun launcher",
        ),
        (
            '[profiles.a]\nengine = "vllm"\n[profiles.b]\nextends = "a"\n',
            "profile 'a', field 'engine': got 'vllm'",
        ),
    ],
)
def test_errors_name_the_file_profile_field_and_what_is_allowed(tmp_path, body, expected):
    path = write(tmp_path, body)
    with pytest.raises(ProfileError) as excinfo:
        load_profiles(path)
    message = str(excinfo.value)
    assert expected in message
    assert str(path) in message


def test_an_inherited_mistake_is_named_where_it_was_written(tmp_path):
    path = write(tmp_path, '[profiles.b]\nextends = "a"\n[profiles.a]\nengine = "vllm"\n')
    with pytest.raises(ProfileError, match="profile 'a', field 'engine'"):
        load_profiles(path)


def test_a_profile_round_trips_through_its_table(tmp_path):
    """What a profile that extends another starts from is the other's table: building a profile
    from its own table (its args already hold its extra_args) gives the same profile."""
    path = write(
        tmp_path,
        """
        [profiles.a]
        args = ["--tp-size", "2"]
        env = { A = "1" }
        output_len = { values = [64, 512], weights = [1, 3] }
        input_len = { uniform = [100, 200] }
        token_id_range = [10, 4000]
        slo = { ttft_s = 2.0 }
        request_rate = [1, 2.5]
        router = { workers = 2, policy = "cache_aware" }
        [profiles.b]
        extends = "a"
        extra_args = ["--speculative-algorithm", "EAGLE3"]
        speculative = true
        window_s = 20
        """,
    )
    for profile in load_profiles(path).profiles.values():
        table = {
            k: v for k, v in profile_table(profile).items() if k not in ("extends", "extra_args")
        }
        again = build(path, profile.name, table, None)
        assert again == replace(
            profile, extends=None, extra_args=(), speculative=False, readiness_path="/health",
            base_profile=profile.base_profile,
        )  # fmt: skip


def test_a_field_is_one_entry_of_the_table():
    """The defaults of a Profile made in code are the fields' defaults, and every field has its
    check's wording, its help and its group (the reference is generated from them)."""
    made = Profile("p", Path("x"))
    for key, (attribute, entry) in SETTINGS.items():
        assert getattr(made, attribute) == entry.convert(entry.default), key
        assert entry.help and entry.group
        assert entry.check is None or entry.allowed, key


def test_missing_file_says_how_to_point_at_one(tmp_path):
    with pytest.raises(ProfileError, match=r"does not exist.*--llm-profiles-file"):
        load_profiles(tmp_path / "nope.toml")


def test_unknown_profile_lists_the_available_ones(tmp_path):
    profiles = load_profiles(write(tmp_path, "[profiles.baseline]\n[profiles.eagle3]\n"))
    with pytest.raises(
        ProfileError,
        match=r"unknown profile 'eagle'.*Did you mean 'eagle3'\?.*Available profiles: baseline, eagle3\.",
    ):
        profiles.select(["eagle"])
    assert [p.name for p in profiles.select(["eagle3", "baseline"])] == ["eagle3", "baseline"]


def test_shipped_profiles_carry_the_seed_configuration(repo_root):
    profiles = load_profiles(repo_root / "perf_suites" / "profiles.toml")
    assert profiles.default == ("sim-baseline", "sim-eagle3")
    baseline, eagle3 = profiles.profiles["baseline"], profiles.profiles["eagle3"]
    for flag in (
        "--trust-remote-code",
        "--disable-custom-all-reduce",
        "--enable-flashinfer-allreduce-fusion",
    ):
        assert flag in baseline.args
    args = list(baseline.args)
    assert args[args.index("--tp-size") + 1] == "8"
    assert args[args.index("--attention-backend") + 1] == "flashinfer"
    assert args[args.index("--cuda-graph-max-bs") + 1] == "128"
    assert baseline.model == "/shared/kimi-k2.5-int4" and baseline.engine == "sglang"
    extra = list(eagle3.args[len(baseline.args) :])
    assert eagle3.args[: len(baseline.args)] == baseline.args
    assert extra[extra.index("--speculative-algorithm") + 1] == "EAGLE3"
    assert extra[extra.index("--mem-fraction-static") + 1] == "0.88"
    assert baseline.concurrency == eagle3.concurrency == (1, 2, 5, 10, 30, 70, 100, 250)
    sim_base, sim_eagle = profiles.profiles["sim-baseline"], profiles.profiles["sim-eagle3"]
    assert sim_base.engine == sim_eagle.engine == "sim"
    assert sim_base.concurrency == (1, 2, 5, 10, 30, 70, 100, 250)
    assert sim_eagle.speculative and not sim_base.speculative


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ('input_len = 100\napi = "chat"', "field 'input_len': synthetic prompts are token ids"),
        ("shared_prefix_len = 10", "field 'shared_prefix_len': applies to synthetic prompts"),
        ("input_len = 100\nshared_prefix_len = 100", "leaves no token of its own"),
        (
            "input_len = { uniform = [50, 200] }\nshared_prefix_len = 60",
            "leaves no token of its own",
        ),
        ('input_len = 100\ndataset = "d.jsonl"', "fields 'input_len' and 'dataset'"),
        ("output_len = { uniform = [5] }", "field 'output_len': 'uniform' is [5]"),
        ("slo = { ttft_ms = 2 }", "field 'slo'"),
        ("token_id_range = [100, 10]", "field 'token_id_range'"),
        (
            "latency_warn_margin = 0.5",
            "latency_warn_margin': 0.5 is larger than latency_fail_margin",
        ),
    ],
)
def test_workload_fields_are_checked_alone_and_together(tmp_path, fields, message):
    path = write(tmp_path, "[profiles.p]\n" + fields + "\n")
    with pytest.raises(ProfileError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        load_profiles(path)
    assert str(path) in str(err.value) and "profile 'p'" in str(err.value)


def test_workload_fields_are_inherited(tmp_path):
    path = write(
        tmp_path,
        """
        [profiles.a]
        output_len = { values = [64, 512], weights = [1, 1] }
        input_len = 1024
        shared_prefix_len = 256
        slo = { ttft_s = 2.0 }

        [profiles.b]
        extends = "a"
        """,
    )
    b = load_profiles(path).profiles["b"]
    assert b.output_len == 288 and b.output_lengths is not None
    assert b.input_len is not None and b.input_len.describe() == 1024
    assert b.shared_prefix_len == 256 and dict(b.slo) == {"ttft_s": 2.0}
