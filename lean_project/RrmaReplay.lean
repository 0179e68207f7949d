/-
RRMA's kernel replay of a checked proof, in the spirit of lean4checker and SafeVerify.

Usage: `lake exe rrma_replay CHECK.olean REFERENCE.olean NAME`

The oracle compiles the checked file (the theorem's context and the agent's proof) and the
reference file (the same context and the statement closed by `sorry`) to `.olean` files, each in
a process of its own. This program, a third process, reads each module's constants, adds every
one of them again to a fresh environment built from the module's imports, through the kernel
(`Environment.replay`), so a constant that entered the environment without a kernel check
(`debug.skipKernelTC`, an environment-editing metaprogram) is caught here. It then compares the
checked theorem with the reference one (same kind, same type, same universe parameters) and
collects the axioms the checked theorem depends on in the replayed environment.

It prints one line of JSON and exits 0 when it could answer (whatever the answer), 1 otherwise:
{"rrma_replay": 1, "theorem": NAME, "replayed": N, "kind": "theorem", "type_matches": true,
 "axioms": ["propext"], "error": null}

Written where no Lean toolchain could be installed: it has not been compiled yet (see
`docs/proofs.md`). The Python side parses its output and fails closed on anything else.
-/
import Lean

open Lean

/-- The kind of a constant, as the report names it. -/
def constKind : ConstantInfo → String
  | .axiomInfo _ => "axiom"
  | .defnInfo _ => "def"
  | .thmInfo _ => "theorem"
  | .opaqueInfo _ => "opaque"
  | .quotInfo _ => "quot"
  | .inductInfo _ => "inductive"
  | .ctorInfo _ => "constructor"
  | .recInfo _ => "recursor"

/-- Every constant of the module in `file`, added again through the kernel on top of its imports.
Unsafe constants are refused (a proof may not depend on one); the count is the number replayed. -/
def replayModule (file : System.FilePath) : IO (Environment × Nat) := do
  unless (← file.pathExists) do
    throw <| IO.userError s!"no such object file: {file}"
  let (mod, _) ← readModuleData file
  let env ← importModules mod.imports {} 0
  let mut constants : Std.HashMap Name ConstantInfo := {}
  for name in mod.constNames, info in mod.constants do
    if info.isUnsafe then
      throw <| IO.userError s!"unsafe constant in the checked module: {name}"
    constants := constants.insert name info
  let replayed ← env.replay constants
  return (replayed, constants.size)

/-- The axioms `name` depends on in `env`. -/
def axiomsOf (env : Environment) (name : Name) : Array Name :=
  let (_, state) := (CollectAxioms.collect name).run env |>.run {}
  state.axioms

def report (theorem : String) (replayed : Nat) (kind : String) (sameType : Bool) (axioms : Array Name)
    (error : Option String) : Json :=
  Json.mkObj [
    ("rrma_replay", toJson (1 : Nat)),
    ("theorem", toJson theorem),
    ("replayed", toJson replayed),
    ("kind", toJson kind),
    ("type_matches", toJson sameType),
    ("axioms", toJson (axioms.map toString)),
    ("error", match error with | some e => toJson e | none => Json.null)]

unsafe def main (args : List String) : IO UInt32 := do
  initSearchPath (← findSysroot)
  match args with
  | [check, reference, theorem] =>
    let name := theorem.toName
    try
      let (env, replayed) ← replayModule check
      let (refEnv, _) ← replayModule reference
      match env.find? name, refEnv.find? name with
      | some info, some refInfo =>
        let sameType := info.type == refInfo.type && info.levelParams == refInfo.levelParams
        IO.println (report theorem replayed (constKind info) sameType (axiomsOf env name) none).compress
      | _, _ =>
        IO.println (report theorem replayed "missing" false #[] (some s!"{theorem} is not in both modules")).compress
      return 0
    catch e =>
      IO.println (report theorem 0 "error" false #[] (some (toString e))).compress
      return 0
  | _ =>
    IO.eprintln "usage: rrma_replay CHECK.olean REFERENCE.olean THEOREM"
    return 1
