"""The Snakemake profiles' settings, read as Snakemake reads them (no cluster needed)."""

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def test_slurm_profile_retries_failed_jobs() -> None:
    """Retried training jobs resume from their saved state, so a node failure or a wall-time kill
    costs the steps since the last save, not the job."""
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert profile["retries"] == 2
    assert profile["executor"] == "slurm"
    # a retried job's unfinished outputs are cleaned up, not taken for finished ones
    assert profile["rerun-incomplete"] is True


def test_slurm_profile_retries_is_an_option_snakemake_knows() -> None:
    from snakemake.cli import get_argument_parser

    parsed = get_argument_parser().parse_args(["--retries", "2"])
    assert parsed.retries == 2
