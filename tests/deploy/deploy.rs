//! The deployment files, checked by the tools the issue names without a Docker engine or a
//! cluster: the Helm chart rendered and linted by real Helm (helm-python-sdk) and validated
//! against the Kubernetes schemas; docker-compose.yml against the compose specification's
//! schema; the Dockerfiles with hadolint. The checks live in `deploy/tests/*.py`.

use std::path::Path;
use std::process::Command;

fn run(script: &str, modules: &[&str]) {
    for m in modules {
        if !support::python_has(m) {
            return;
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("python3")
        .arg(root.join("deploy/tests").join(script))
        .current_dir(&root)
        .output()
        .expect("python3 runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{script} failed:\n{text}");
    eprintln!("{text}");
}

#[test]
fn helm_chart_renders_lints_and_validates() {
    run(
        "check_chart.py",
        &["helm_python", "kubernetes_validate", "yaml"],
    );
}

#[test]
fn compose_file_and_dockerfiles_check_out() {
    run("check_compose_docker.py", &["jsonschema", "yaml"]);
}
