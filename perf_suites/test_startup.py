"""Startup: the seconds from launch to ready of each profile's server, one value a launch,
gated against its golden's launches like any other figure (lower is better). A profile's
``startup`` field says whether its launches are cold (nothing cached on a fresh runner) or
warm; the kind is part of the golden's key. Skipped for a server the run attached to."""


def test_startup(llmperf, llm_profile):
    """Nothing to measure here: the session's launch was timed when its server came up."""
    llmperf.check_startup()
