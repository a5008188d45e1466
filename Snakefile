# certified-circuits workflow: attribution -> votes -> certificates -> evaluation -> tables/figures.
#
#   snakemake --cores all                                   # embedded default (config.yaml)
#   snakemake --cores all --configfile configs/paper.yaml   # the paper's setup on real data
#   snakemake --profile profiles/slurm --configfile configs/paper.yaml
#
# Rules are thin: each calls one `certified-circuits <stage>` with explicit inputs and outputs.

import os
import sys

from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config.yaml"


# HDF5 file locking breaks on NFS/Lustre; each output has exactly one writer, so it is not needed.
os.environ.setdefault("HDF5_USE_FILE_LOCKING", "FALSE")


validate(config, "config.schema.yaml")


include: "rules/common.smk"
include: "rules/checks.smk"
include: "rules/vision.smk"
include: "rules/language.smk"
include: "rules/certification.smk"
include: "rules/reports.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True


include: "rules/tracking.smk"
