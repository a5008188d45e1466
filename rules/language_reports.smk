# The language half's outputs after the sufficiency tables (rules/reports.smk): Graph JSON at the selected K, MIB's
# faithfulness table and submission files. Which of them this config runs and what each reads and writes:
# pipeline/plans/language_reports.py (language_report_outputs). The attack: rules/reports.smk.

LTABLES_OUT = tables.sufficiency_tables(config, PATHS, VCONCEPTS)["language_tables"].outputs
LREPORTS = language_reports.language_report_outputs(config, PATHS)


if "language_graphs" in LREPORTS:
    LANGUAGE_CIRCUITS = language_reports.language_circuits(config, PATHS)

    rule language_graphs:
        """Certified circuits as hannamw/EAP-IG Graph JSON at the K selected on held-out prompts (MIB files)."""
        input:
            selected=LTABLES_OUT["selected"],
            circuits=[path for row in LANGUAGE_CIRCUITS for path in row[2:]],
        output: directory(LREPORTS["language_graphs"]["folder"])
        params:
            job=job_env("language_graphs"),
            circuits=item_options("--circuit", LANGUAGE_CIRCUITS),
        log: log_path("language_graphs")
        conda: ENV
        shell: stage_command("report-graphs {params.circuits} --selected {input.selected:q} --out-dir {output:q}")


if "language_faithfulness_mib_table" in LREPORTS:

    rule language_faithfulness_mib_table:
        """CPR (signed ranking) and CMD (|score| ranking) on MIB's grid, per task and eval set (docs/mib.md)."""
        input: [PATHS.faithfulness_mib(LX, task) for task in LANGUAGE["tasks"]]
        output: **LREPORTS["language_faithfulness_mib_table"],
        params:
            job=job_env("language_faithfulness_mib_table"),
            out=output_dir,
        log: log_path("language_faithfulness_mib_table")
        conda: ENV
        shell: stage_command("report-mib-faithfulness --inputs {input:q} --out-dir {params.out:q}")


if "language_mib" in LREPORTS:
    # every setting of each task and the held-out selection table: the job exports the selected setting
    MIB_CIRCUITS = language.mib_circuits(config, PATHS)
    MIB_SELECTED_TABLE = language.language_selected_table(config, PATHS)

    rule language_mib:
        """Certified circuits as MIB circuit-track submission files: one Graph JSON per edge fraction, of each
        task's setting selected on held-out prompts (docs/mib.md)."""
        input:
            circuits=list(dict.fromkeys(path for row in MIB_CIRCUITS for path in row[1:])),
            selected=[MIB_SELECTED_TABLE] if MIB_SELECTED_TABLE else [],
        output: directory(LREPORTS["language_mib"]["folder"])
        params:
            job=job_env("language_mib"),
            circuits=item_options("--circuit", MIB_CIRCUITS),
            selected=f"--selected {q(MIB_SELECTED_TABLE)}" if MIB_SELECTED_TABLE else "",
            model=q(language.mib_model_name(config)),
            method=q(LANGUAGE["mib"]["method"]),
        log: log_path("language_mib")
        conda: ENV
        shell:
            stage_command("report-mib {params.circuits} {params.selected} --model-name {params.model} "
                          "--method {params.method} --out-dir {output:q}")
