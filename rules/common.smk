# Shared helpers: path layout (the contract between rules), value formatting, job environment.
#
# Layout (all under config["results_dir"]):
#   attributions/{experiment}/{split}/{concept}.h5
#   votes/{experiment}/{split}/{concept}/{scorer}/p{p_del}_n0{n0}_n{n}_s{seed}.h5
#   certificates/{experiment}/{split}/{concept}/{scorer}/p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}_a{alpha}_{correction}.h5
#   sufficiency/{experiment}/{split}/{concept}/{scorer}/p{p_del}_n0{n0}_n{n}_s{seed}/t{tau}_a{alpha}_{correction}.csv
#   tables/ figures/ benchmarks/ logs/ mlflow.db
# Every hyperparameter that changes a result is part of its path, so changing tau reruns only
# certification and what follows it, changing p_del or n reruns votes onward, and old results stay.

import os

RESULTS = config["results_dir"].rstrip("/")


def fmt(value):
    """A float as it appears in paths: 0.95 -> '0.95', 0.001 -> '0.001' (plain Python, no numpy)."""
    return format(float(value), "g")


def setting_tag(cert):
    """Votes-level tag of a certification block."""
    return f"p{fmt(cert['p_del'])}_n0{cert['n0']}_n{cert['n']}_s{cert['seed']}"


def decision_tag(cert):
    return f"t{fmt(cert['tau'])}_a{fmt(cert['alpha'])}_{cert['correction']}"


def attribution_path(experiment, split, concept):
    return f"{RESULTS}/attributions/{experiment}/{split}/{concept}.h5"


def votes_path(experiment, split, concept, scorer, cert):
    return f"{RESULTS}/votes/{experiment}/{split}/{concept}/{scorer}/{setting_tag(cert)}.h5"


def certificates_path(experiment, split, concept, scorer, cert):
    return (f"{RESULTS}/certificates/{experiment}/{split}/{concept}/{scorer}/"
            f"{setting_tag(cert)}/{decision_tag(cert)}.h5")


def sufficiency_path(experiment, split, concept, scorer, cert):
    return (f"{RESULTS}/sufficiency/{experiment}/{split}/{concept}/{scorer}/"
            f"{setting_tag(cert)}/{decision_tag(cert)}.csv")


def cli_options(options):
    """A config mapping as command-line options: {n_classes: 3, widths: [8, 16]} -> '--n-classes 3 --widths 8 16'."""
    parts = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            parts.append(flag if value else "")
        elif isinstance(value, (list, tuple)):
            parts.append(flag + " " + " ".join(str(v) for v in value))
        else:
            parts.append(f"{flag} {value}")
    return " ".join(p for p in parts if p)


# Every job runs `certified-circuits`; this prefix tells it which rule and wildcards it serves, so
# the job's MLflow record is tagged with them (the run id itself comes from the environment).
def tracked(command):
    return "CC_RULE={rule} CC_WILDCARDS='{wildcards}' " + command


wildcard_constraints:
    experiment=r"[A-Za-z0-9_\-]+",
    split=r"[A-Za-z0-9_\-]+",
    concept=r"[A-Za-z0-9_\-]+",
    scorer=r"[a-z_]+",
    p_del=r"[0-9.e\-]+",
    n0=r"[0-9]+",
    n=r"[0-9]+",
    seed=r"[0-9]+",
    tau=r"[0-9.e\-]+",
    alpha=r"[0-9.e\-]+",
    correction=r"bonferroni|holm",
