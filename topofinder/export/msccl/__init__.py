"""The MSCCL runtime (msccl-executor, microsoft/msccl): the XML writer of the rank-program IR
(:mod:`.writer`), the runtimes' limits (:mod:`.limits`) and the fit checks against them
(:mod:`.fit`), the re-import of a written XML (:mod:`.reimport`), and the XML's independent
check: its parser (:mod:`.parser`), the parser rules on every rank (:mod:`.rules`) and the
execution model (:mod:`.execution`)."""
