//! Handing a placed model its GPUs (the memory router): `${GPU}` in the
//! command, stop command and environment becomes the GPU ids (`0` or `0,1`),
//! and `CUDA_VISIBLE_DEVICES` and `HIP_VISIBLE_DEVICES` are set to them unless
//! the model's `cmd` or `env` already sets them.

use super::ProcessSpec;

/// The placeholder the configuration leaves for the placement.
const GPU_PLACEHOLDER: &str = "${GPU}";

/// The environment variables that select GPUs for CUDA and ROCm programs.
pub(crate) const VISIBLE_DEVICES: [&str; 2] = ["CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"];

/// `spec` as started on `gpus` (ids); unchanged when not placed.
pub(crate) fn placed(mut spec: ProcessSpec, gpus: Option<&[u32]>) -> ProcessSpec {
    let Some(gpus) = gpus else {
        return spec;
    };
    let list = gpus
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let fill = |s: &str| s.replace(GPU_PLACEHOLDER, &list);
    for var in VISIBLE_DEVICES {
        let set_by_model = spec.cmd.contains(var) || spec.env.iter().any(|(name, _)| name == var);
        if !set_by_model {
            spec.env.push((var.to_owned(), list.clone()));
        }
    }
    spec.cmd = fill(&spec.cmd);
    spec.cmd_stop = spec.cmd_stop.as_deref().map(fill);
    for (_, value) in &mut spec.env {
        *value = fill(value);
    }
    spec
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn spec(cmd: &str, env: &[(&str, &str)]) -> ProcessSpec {
        ProcessSpec {
            model: "m".into(),
            cmd: cmd.into(),
            cmd_stop: Some("stop --gpu ${GPU} ${PID}".into()),
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            proxy: "http://127.0.0.1:1".into(),
            check_endpoint: None,
            health_check_timeout: Duration::from_secs(1),
            sleep: None,
            monitor: crate::upstream::Monitor::default(),
        }
    }

    #[test]
    fn gpu_expands_to_the_ids_and_selects_the_devices() {
        let s = placed(
            spec("serve --device ${GPU}", &[("A", "x${GPU}")]),
            Some(&[0, 2]),
        );
        assert_eq!(s.cmd, "serve --device 0,2");
        assert_eq!(s.cmd_stop.as_deref(), Some("stop --gpu 0,2 ${PID}"));
        assert!(s.env.contains(&("A".into(), "x0,2".into())));
        assert!(
            s.env
                .contains(&("CUDA_VISIBLE_DEVICES".into(), "0,2".into()))
        );
        assert!(
            s.env
                .contains(&("HIP_VISIBLE_DEVICES".into(), "0,2".into()))
        );
    }

    #[test]
    fn a_device_variable_the_model_sets_is_left_alone() {
        let s = placed(spec("serve", &[("CUDA_VISIBLE_DEVICES", "3")]), Some(&[1]));
        let cuda: Vec<_> = s
            .env
            .iter()
            .filter(|(k, _)| k == "CUDA_VISIBLE_DEVICES")
            .collect();
        assert_eq!(cuda, [&("CUDA_VISIBLE_DEVICES".to_owned(), "3".to_owned())]);
        assert!(s.env.contains(&("HIP_VISIBLE_DEVICES".into(), "1".into())));
        let s = placed(spec("env HIP_VISIBLE_DEVICES=0 serve", &[]), Some(&[1]));
        assert!(!s.env.iter().any(|(k, _)| k == "HIP_VISIBLE_DEVICES"));
    }

    #[test]
    fn an_unplaced_model_starts_as_configured() {
        let s = placed(spec("serve ${GPU}", &[]), None);
        assert_eq!(s, spec("serve ${GPU}", &[]));
    }
}
