"""Hypothesis profiles of the fuzzers: ``--hypothesis-profile=fuzz-debug`` skips shrinking
(a failure is reported as generated, at once) when hunting a bug by hand."""

from hypothesis import Phase, settings

settings.register_profile("fuzz-debug", phases=[Phase.explicit, Phase.generate])
