//! Build script: records the git commit the binary is built from (`--version`, the metrics
//! endpoint's `cairn_build_info`) as `CAIRN_COMMIT`. Outside a git checkout (a source tarball,
//! a Docker build context without `.git`) it takes `CAIRN_COMMIT` from the environment, or
//! says `unknown`.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-env-changed=CAIRN_COMMIT");
    let commit = git(&["rev-parse", "--short=12", "HEAD"]);
    if commit.is_some() {
        // Rebuild when HEAD moves: HEAD itself (a checkout), the branch's ref (a commit) and
        // packed-refs (a gc), wherever this worktree keeps them.
        if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
            println!(
                "cargo:rerun-if-changed={}",
                PathBuf::from(dir).join("HEAD").display()
            );
        }
        if let Some(common) = git(&["rev-parse", "--git-common-dir"]) {
            let common = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(common);
            println!(
                "cargo:rerun-if-changed={}",
                common.join("packed-refs").display()
            );
            if let Some(head_ref) = git(&["symbolic-ref", "-q", "HEAD"]) {
                println!("cargo:rerun-if-changed={}", common.join(head_ref).display());
            }
        }
    }
    let commit = commit
        .or_else(|| std::env::var("CAIRN_COMMIT").ok().filter(|c| !c.is_empty()))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CAIRN_COMMIT={commit}");
}
