"""Engines beyond SGLang: the named llamacpp engine, a command's health path, explicit speculation."""

from __future__ import annotations

import os
import textwrap

import pytest

from pytest_llmperf.errors import ProfileError, ServerStartError
from pytest_llmperf.profiles_file import load_profiles
from pytest_llmperf.servers.lifecycle import build_command


def profiles(tmp_path, body: str):
    path = tmp_path / "conf" / "profiles.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return load_profiles(path).profiles


@pytest.fixture
def llama_files(tmp_path):
    binary = tmp_path / "bin" / "llama-server"
    binary.parent.mkdir()
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    model = tmp_path / "m.gguf"
    model.write_text("gguf")
    return binary, model


def test_llamacpp_builds_its_command_from_binary_and_model_relative_to_the_profiles_file(
    tmp_path, llama_files
):
    binary, model = llama_files
    p = profiles(
        tmp_path,
        """
        [profiles.llama]
        engine = "llamacpp"
        binary = "../bin/llama-server"
        model = "../m.gguf"
        args = ["-np", "4"]
    """,
    )["llama"]
    command = build_command(p, "127.0.0.1", 8123, tmp_path)
    assert [os.path.realpath(c) for c in command[:3:2]] == [str(binary), str(model)]
    assert command[1::2][:3] == ["-m", "--host", "--port"] and command[-4:] == [
        "--port",
        "8123",
        "-np",
        "4",
    ]
    assert p.readiness_path == "/health" and p.api == "sglang" and not p.speculative


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        (
            'binary = "../bin/nothing-here"\nmodel = "../m.gguf"',
            "llama-server {tmp}/conf/../bin/nothing-here is not an executable file ({tmp}/conf/profiles.toml, profile "
            "'llama', field 'binary')",
        ),
        (
            'binary = "../bin/llama-server"\nmodel = "absent.gguf"',
            "the GGUF model {tmp}/conf/absent.gguf does not exist",
        ),
    ],
)
def test_llamacpp_says_which_field_to_fix_when_a_file_is_missing(
    tmp_path, llama_files, fields, message
):
    p = profiles(tmp_path, f'[profiles.llama]\nengine = "llamacpp"\n{fields}\n')["llama"]
    with pytest.raises(ServerStartError) as excinfo:
        build_command(p, "127.0.0.1", 1, tmp_path)
    assert message.format(tmp=tmp_path) in str(excinfo.value)
    assert "scripts/" not in str(excinfo.value)  # nothing a wheel's user does not have


def test_llamacpp_args_must_not_set_what_the_plugin_sets(tmp_path):
    with pytest.raises(ProfileError, match="field 'args': -m is set by the plugin"):
        profiles(tmp_path, '[profiles.llama]\nengine = "llamacpp"\nargs = ["-m", "x.gguf"]\n')


def test_health_path_and_speculation_are_fields_with_engine_defaults(tmp_path):
    got = profiles(
        tmp_path,
        """
        [profiles.plain]
        engine = "command"
        command = ["srv", "--port", "{port}"]

        [profiles.vllm]
        engine = "command"
        command = ["vllm", "serve", "--port", "{port}"]
        health_path = "/ping"
        speculative = true
        base_profile = "plain"

        [profiles.draft]
        engine = "llamacpp"
        args = ["-md", "draft.gguf"]

        [profiles.sim]
        args = ["--speculative-algorithm", "EAGLE3"]
        speculative = false
    """,
    )
    assert (got["plain"].readiness_path, got["plain"].speculative) == ("/health", False)
    assert (got["vllm"].readiness_path, got["vllm"].speculative, got["vllm"].base_profile) == (
        "/ping",
        True,
        "plain",
    )
    assert got["draft"].speculative  # llama.cpp's draft model flag
    assert got["sim"].readiness_path == "/health_generate" and not got["sim"].speculative


@pytest.mark.parametrize(
    ("field", "expected"),
    [
        ('health_path = "health"', "field 'health_path': got 'health'; expected a URL path"),
        ('speculative = "yes"', "field 'speculative': got 'yes'; expected true or false"),
    ],
)
def test_bad_new_fields_name_the_field(tmp_path, field, expected):
    with pytest.raises(ProfileError, match=expected):
        profiles(tmp_path, f"[profiles.p]\n{field}\n")


SGLANG_INFO = {
    "/server_info": {
        "version": "0.5.23",
        "cuda_graph_max_bs": 64,
        "attention_backend": "fa3",
        "port": 1234,
        "log_requests": False,
    }
}
LLAMA_INFO = {
    "/props": {
        "total_slots": 4,
        "build_info": "b7000",
        "default_generation_settings": {"n_ctx": 512},
    }
}


@pytest.mark.parametrize(
    ("info", "reads_as", "version", "context"),
    [
        (SGLANG_INFO, "sglang", "0.5.23", None),
        (LLAMA_INFO, "llamacpp", "b7000", 512),
        ({}, "", None, None),
    ],
    ids=["answers-as-sglang", "answers-as-llamacpp", "answers-nothing"],
)
def test_a_server_of_no_known_kind_is_read_as_the_engine_its_answers_match(
    tmp_path, info, reads_as, version, context
):
    """A ``command`` server is read by what it answers: SGLang's /server_info (fields under
    their current names, its performance keys hard), llama.cpp's /props, else its command line."""
    from pytest_llmperf import engines
    from pytest_llmperf.golden import fingerprint

    (profile,) = profiles(
        tmp_path,
        """
        [profiles.wrapped]
        engine = "command"
        command = ["serve", "--port", "{port}"]
        args = ["--cuda-graph-max-bs", "64"]
        """,
    ).values()
    engine = engines.of(profile)
    fp = fingerprint.take(profile, info)
    assert fp.reads_as == reads_as
    assert fp.soft.get("server_version") == version
    assert engine.context_per_request(info) == context
    if reads_as == "sglang":
        # Hard: what the profile sets and SGLang's performance keys; the port is volatile.
        # Hard: what the profile sets, under the name SGLang gave it later, and SGLang's
        # performance keys; the port describes the process and is dropped.
        assert fp.hard["server_args"] == {
            "cuda_graph_max_bs_decode": 64,
            "attention_backend": "fa3",
        }
        assert fp.soft["server_args"] == {"log_requests": False}
        assert fingerprint.Fingerprint.from_json(fp.to_json()).reader.name == "sglang"
    elif reads_as == "llamacpp":
        assert fp.hard["server_args"] == {"total_slots": 4, "n_ctx": 512}
    else:
        assert fp.hard["server_args"] == {
            "command": ["serve", "--port", "{port}"],
            "args": ["--cuda-graph-max-bs", "64"],
        }
        assert "reads_as" not in fp.to_json()


@pytest.mark.parametrize(
    ("engine_name", "info", "at_once"),
    [
        ("sglang", {"/server_info": {"max_running_requests": 48}}, 48),
        ("sglang", {"/server_info": {"max_running_requests": 48, "dp_size": 2}}, 96),
        # SGLang leaves it None unless set (or a speculative server's 48): its cap is then
        # derived from the KV cache, which it does not report as a request count.
        ("sglang", {"/server_info": {"max_running_requests": None}}, None),
        ("sglang", {"/get_server_info": {"max_running_requests": "16"}}, 16),
        ("llamacpp", {"/props": {"total_slots": 4}}, 4),
        ("llamacpp", {"/props": {}}, None),
    ],
)
def test_the_requests_a_server_runs_at_once_are_read_from_what_it_says(engine_name, info, at_once):
    """What a windowed closed loop staggers at C over a server's cap (load/closed_loop.py)."""
    from pytest_llmperf import engines

    assert engines.get(engine_name).running_at_once(info) == at_once
