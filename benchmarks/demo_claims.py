"""How often the demo's confirmatory claims come out as README.md states them, over simulated seeds (issue 25 item 7).

Each seed draws every agent's trials as counts from its sim model (`hrbench.simulate.simulated_outcomes`) and
computes the study's claims table as the asset graph does (`conditions_acceptance.claims_of`: Holm across all
21 claims at the study's α, adjusted intervals at 1 − α/k). README's statements, as verdicts of those claims:

* sim-rotting: Γ(baseline) and Γ(state_repair) `different`, Γ(context_reset) not, ΔΓ(context_reset) `different`;
* sim-fragile: the mirror image (Γ(baseline), Γ(context_reset) `different`, Γ(state_repair) not,
  ΔΓ(state_repair) `different`);
* sim-steady: no claim `different` (its verdicts `inconclusive`: the demo declares no equivalence margin).

Also printed: how often every one of the 21 verdicts agrees with its truth (`different` exactly where the true
Γ or ΔΓ is not 0).

    python benchmarks/demo_claims.py [--seeds N] [--first-seed S] [--study S] [--m M --m0 M0 --level L --alpha A]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conditions_acceptance import DEMO, _design, claim_replications  # noqa: E402

from hrbench.design import StudyDesign  # noqa: E402
from hrbench.protocol import LoadedStudy  # noqa: E402

STATED = {  # (agent, kind, condition) -> README's verdict: True = `different`, False = not
    ("sim-rotting", "residual", "baseline"): True, ("sim-rotting", "residual", "state_repair"): True,
    ("sim-rotting", "residual", "context_reset"): False, ("sim-rotting", "contrast", "context_reset"): True,
    ("sim-fragile", "residual", "baseline"): True, ("sim-fragile", "residual", "context_reset"): True,
    ("sim-fragile", "residual", "state_repair"): False, ("sim-fragile", "contrast", "state_repair"): True,
}
NULL_AGENT = "sim-steady"


def clauses(claims: pd.DataFrame) -> dict[str, bool]:
    """README's statements on one claims table, by name."""
    verdict = {(r.agent, r.kind, r.condition): r.verdict for r in claims.itertuples()}
    ok = {f"{a}: {'Γ' if k == 'residual' else 'ΔΓ'}({c}) {'' if want else 'not '}different":
          (verdict[(a, k, c)] == "different") == want for (a, k, c), want in STATED.items()}
    ok[f"{NULL_AGENT}: no claim different"] = not (claims[claims["agent"] == NULL_AGENT]["verdict"] == "different").any()
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", default=str(DEMO))
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--m", type=int, default=None, help="override trials.checkpoint")
    parser.add_argument("--m0", type=int, default=None, help="override trials.natural")
    parser.add_argument("--level", type=float, default=None, help="override bootstrap.level")
    parser.add_argument("--n-boot", type=int, default=None, help="override bootstrap.n_boot")
    parser.add_argument("--alpha", type=float, default=None, help="override claims.alpha (family-wise level)")
    args = parser.parse_args()
    design = _design(args)
    if args.alpha is not None:
        study = design.study.model_copy(update={"claims": design.study.claims.model_copy(update={"alpha": args.alpha})})
        design = StudyDesign(LoadedStudy(study=study, source=design.loaded.source))
    study = design.study
    start = time.process_time()
    held, n = Counter(), 0
    for claims in claim_replications(design, args.seeds, args.first_seed):
        one = clauses(claims)
        held.update({k: int(v) for k, v in one.items()})
        held["every stated clause at once"] += all(one.values())
        truth_nonzero = claims["truth"].abs() > 1e-9
        held["(all 21) every verdict agrees with its truth"] += bool(
            ((claims["verdict"] == "different") == truth_nonzero).all())
        n += 1
    print(f"{n} seeds of {study.name} ({args.first_seed}…): m_i={study.trials.checkpoint}, m_0={study.trials.natural}, "
          f"level={study.bootstrap.level}, {study.n_claims} claims, {study.claims.error_rate} at α={study.claims_alpha:g} "
          f"({time.process_time() - start:.0f} s of CPU)")
    for clause in sorted(held, key=lambda k: (k.startswith(("every", "(all")), k)):
        print(f"  {held[clause] / n:6.1%}  {clause}")


if __name__ == "__main__":
    main()
