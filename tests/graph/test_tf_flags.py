"""TF_XLA_FLAGS parsing: TensorFlow's names and defaults, unknown flags a clear error."""

from __future__ import annotations

import pytest

from xla_teach.flags import FlagError
from xla_teach.graph import ClusteringOptions, Session, parse_tf_xla_flags

from .graph_test_utils import mixed_graph


def test_defaults_and_values() -> None:
    assert parse_tf_xla_flags("").tf_xla_min_cluster_size == 4
    f = parse_tf_xla_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=2 "
                           "--tf_xla_clustering_debug --tf_xla_cluster_exclude_ops=Tanh,Exp")
    assert (f.tf_xla_auto_jit, f.tf_xla_cpu_global_jit, f.tf_xla_min_cluster_size) == (2, True, 2)
    assert f.tf_xla_clustering_debug and f.exclude_ops == {"Tanh", "Exp"}
    assert parse_tf_xla_flags("--tf_xla_cpu_global_jit=false").tf_xla_cpu_global_jit is False


def test_environment_variable_is_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=1")
    assert parse_tf_xla_flags().tf_xla_auto_jit == 1
    assert Session(mixed_graph()).options.auto_jit == 1


def test_unknown_flag_suggests_the_closest() -> None:
    with pytest.raises(FlagError, match=r"unknown flag --tf_xla_auto_jt in TF_XLA_FLAGS \(did you mean "
                                        r"--tf_xla_auto_jit\?\)"):
        parse_tf_xla_flags("--tf_xla_auto_jt=2")
    with pytest.raises(FlagError, match="takes -1, 0, 1 or 2"):
        parse_tf_xla_flags("--tf_xla_auto_jit=3")
    with pytest.raises(FlagError, match="takes an integer"):
        parse_tf_xla_flags("--tf_xla_min_cluster_size=big")
    with pytest.raises(FlagError, match="start with '--'"):
        parse_tf_xla_flags("tf_xla_auto_jit=2")


def test_level_zero_defers_to_the_session_setting() -> None:
    flags = parse_tf_xla_flags("--tf_xla_cpu_global_jit")
    assert ClusteringOptions.from_flags(flags, session_level=0).auto_jit == 0
    assert ClusteringOptions.from_flags(flags, session_level=2).auto_jit == 2
    assert ClusteringOptions.from_flags(parse_tf_xla_flags("--tf_xla_auto_jit=-1"), session_level=2).auto_jit == -1
