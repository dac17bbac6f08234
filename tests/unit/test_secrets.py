"""Which names are secrets, how ``${NAME}`` is taken from the environment, and that masking
reaches every place a secret can hide (command lines, env, nested /server_info, free text)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_llmperf.errors import ProfileError
from pytest_llmperf.profiles import Profile
from pytest_llmperf.secrets import MASK, Redactor, is_secret_name, resolve


@pytest.mark.parametrize(
    "name",
    ["HF_TOKEN", "OPENAI_API_KEY", "api_key", "--admin-api-key", "ssl_keyfile_password",
     "AWS_SECRET_ACCESS_KEY", "DB_PASSWD", "GITHUB_TOKEN", "hf-token", "MY_SECRET_THING"],
)  # fmt: skip
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize(
    "name",
    ["max_total_tokens", "tokenizer_path", "speculative_token_map", "--max-prefill-tokens",
     "NCCL_PROTO", "CUDA_VISIBLE_DEVICES", "TOKENIZERS_PARALLELISM", "kv_cache_dtype",
     "AWS_ACCESS_KEY_ID", "bucket_inter_token_latency"],
)  # fmt: skip
def test_ordinary_names(name):
    assert not is_secret_name(name)


def profile(**fields) -> Profile:
    return Profile(name="p", source=Path("/x/profiles.toml"), **fields)


def test_references_are_taken_from_the_environment_and_every_secret_is_masked():
    environ = {"HF_TOKEN": "hf_abcdef123", "KEY": "sk-test-9999", "GPUS": "0,1"}
    resolved = resolve(
        profile(
            env={"HF_TOKEN": "${HF_TOKEN}", "CUDA_VISIBLE_DEVICES": "${GPUS}"},
            args=("--api-key", "${KEY}", "--tp-size", "2"),
        ),
        environ,
    )
    assert resolved.profile.env == {"HF_TOKEN": "hf_abcdef123", "CUDA_VISIBLE_DEVICES": "0,1"}
    assert resolved.profile.args == ("--api-key", "sk-test-9999", "--tp-size", "2")
    assert resolved.api_key == "sk-test-9999"
    r = resolved.redactor
    assert r.command(["srv", "--api-key", "sk-test-9999", "--admin-api-key=zz-zz-zz"]) == [
        "srv", "--api-key", MASK, f"--admin-api-key={MASK}"
    ]  # fmt: skip
    assert r.env(resolved.profile.env) == {"HF_TOKEN": MASK, "CUDA_VISIBLE_DEVICES": "0,1"}
    info = {
        "server_args": {"api_key": "sk-test-9999", "tp_size": 2, "kt_max_per_token": 4},
        "launch_command": "sglang serve --api-key sk-test-9999 --tp-size 2",
        "nested": [{"note": "token hf_abcdef123 used"}],
    }
    assert r.data(info) == {
        "server_args": {"api_key": MASK, "tp_size": 2, "kt_max_per_token": 4},
        "launch_command": f"sglang serve --api-key {MASK} --tp-size 2",
        "nested": [{"note": f"token {MASK} used"}],
    }
    assert r.text("log: api_key='sk-test-9999'") == f"log: api_key='{MASK}'"


def test_api_key_env_and_missing_variables_name_the_field():
    assert resolve(profile(api_key_env="K"), {"K": "secret-1"}).api_key == "secret-1"
    with pytest.raises(ProfileError, match=r"profile 'p', field 'api_key_env': \$K is not set"):
        resolve(profile(api_key_env="K"), {})
    with pytest.raises(
        ProfileError,
        match=r"profile 'p', field 'env': \$\{HF_TOKEN\} is not set in the environment",
    ):
        resolve(profile(env={"HF_TOKEN": "${HF_TOKEN}"}), {})


def test_a_secret_inside_a_longer_one_is_masked_whole():
    r = Redactor(["abcd", "abcdefgh"])
    assert r.text("x abcdefgh y abcd") == f"x {MASK} y {MASK}"
    assert not Redactor(["ab"])  # too short to mask in free text
