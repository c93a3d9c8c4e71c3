# SPDX-License-Identifier: MIT
"""Jobs of many ranks: output names from the launcher's environment, and no recorder
destroying another's file."""
import os
import subprocess

import pytest

pytestmark = pytest.mark.usefixtures("need_bpf")


def rank_env(rank, **extra):
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID",
                        "LOCAL_RANK", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")}
    if rank is not None:
        env["RANK"] = str(rank)
    env.update(extra)
    return env


def test_ranks_with_one_literal_output_lose_nothing(ep, bins):
    """Three ranks started with the same -o (no %r): each recording ends up whole in a file
    of its own; the ones that found the file taken say where they went."""
    procs = [subprocess.Popen([ep.bin, "record", "-q", "-F", "499", "-o", "same.data", "--",
                               bins["hot3-fp"], "0.6"], cwd=ep.dir, env=rank_env(r),
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for r in range(3)]
    errs = [p.communicate(timeout=60)[1] for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    files = sorted(f for f in os.listdir(ep.dir) if f.startswith("same.data"))
    assert len(files) == 3 and "same.data" in files, files
    moved = [e for e in errs if "is being written by another eprof record" in e]
    assert len(moved) == 2, errs
    for f in files:  # every one whole, with the job's samples
        rep = ep.report_json(f)
        assert rep["samples"] > 100, (f, rep["samples"])
        assert any(fn["name"] == "main" or "hot" in fn["name"] for fn in rep["functions"])


def test_output_name_patterns(ep):
    env = rank_env(5, LOCAL_RANK="1", SLURM_JOB_ID="4242")
    ep.run("record", "-q", "-o", "job%j.r%r.l%l.%h.data", "--", "true", env=env)
    host = os.uname().nodename
    assert os.path.exists(os.path.join(ep.dir, f"job4242.r5.l1.{host}.data"))
    ep.run("record", "-q", "-o", "p%p-%%.data", "--", "true", env=env)
    assert any(f.startswith("p") and f.endswith("-%.data") for f in os.listdir(ep.dir))


@pytest.mark.parametrize("pattern,needs", [("r%r.data", "RANK"), ("j%j.data", "SLURM_JOB_ID"),
                                           ("x%q.data", "unknown %q")])
def test_output_name_errors(ep, pattern, needs):
    r = ep.run("record", "-q", "-o", pattern, "--", "true", env=rank_env(None), check=False)
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1 and needs in r.stderr, r.stderr
    assert not [f for f in os.listdir(ep.dir) if f.endswith(".data")]
