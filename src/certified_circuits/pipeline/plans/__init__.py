"""What the workflow plans, by domain as ``rules/`` is: which jobs exist, their command-line options, their inputs
and outputs, and ``rule all``'s targets.

Pure functions of the checked config (as the Snakefile sees it: validated, schema defaults filled in, checked by
:func:`certified_circuits.pipeline.config.check_config`), of the result layout
(:class:`~certified_circuits.pipeline.layout.Layout`) and of the classes the config certifies
(``check_config(config).concepts``). ``rules/common.smk`` binds them to the run's ``config``, ``PATHS`` and
``VCONCEPTS``; a rule's input or params function takes the job's ``wildcards`` (``*_job_*`` functions, bound with
:func:`functools.partial`). tests/unit/pipeline/test_pipeline_jobs.py calls them on the default, smoke and paper configs and
compares the whole dry run with recorded job lists.

=================  =====================================================================  ==========================
module             what it plans                                                          rules
=================  =====================================================================  ==========================
``common``         shell words (every config string through ``q``), logs, resources,      every rule
                   the shared params functions (``output_dir``, ``input_pairs``)
``certification``  a setting as the options of a stage (votes, certify, attack,           ``rules/certification.smk``
                   stability, runtime): the one place that spells it
``vision``         the vision setting (its one builder), data, model, scorers,            ``rules/vision.smk``
                   attribution and evaluation jobs
``language``       the language settings (their one builder), tasks, model, eval sets,    ``rules/language.smk``
                   the MIB circuits
``testbed``        which experiments have a ground truth, the stability and recovery      ``rules/testbed.smk``
                   jobs, the testbed's targets
``reports``        which report rules exist and what they write and read, the targets     ``rules/reports.smk``,
                   of ``rule all`` by domain                                              the ``Snakefile``
``setting_plans``  every setting of a config planned exactly at parse time (the           the ``Snakefile``
                   planner's verdict, warnings and MLflow tags)
=================  =====================================================================  ==========================

Every config string that reaches a shell goes through :func:`certified_circuits.pipeline.plans.common.q`
(``shlex.quote``); numbers are written exactly (:func:`certified_circuits.core.setting.number`).
"""
