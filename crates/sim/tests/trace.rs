//! The trace readers (`fairsched_sim::trace`) on small handwritten inputs: every case is data
//! (input and expected jobs, skips, adjustments, machine, or error) run through one `check`.
//! A job is compared as one line of text, `ID @LINE submit S ran D USER/GROUP WIDTHxUNIT wait W
//! filter F`, so that a failure shows the whole job.

use fairsched_sim::trace::{
    Trace, TraceError, TraceFormat, TraceJob, load, parse_alibaba, parse_swf,
};
use std::io::Write;
use std::path::Path;

/// What a case reads.
enum Input {
    Swf(&'static str),
    Alibaba {
        pods: &'static str,
        nodes: Option<&'static str>,
    },
}

/// What a case expects.
enum Expect {
    Trace {
        jobs: &'static [&'static str],
        skipped: &'static [(&'static str, u64)],
        adjusted: &'static [(&'static str, u64)],
        /// `COUNTxRESOURCES [TAGS]` per group; None: no machine.
        machine: Option<&'static [&'static str]>,
    },
    Error {
        /// The file the error names.
        file: &'static str,
        line: Option<u64>,
        field: Option<&'static str>,
        /// A fragment of the message.
        message: &'static str,
    },
}

struct Case {
    name: &'static str,
    input: Input,
    expect: Expect,
}

const SWF_FILE: &str = "test.swf";
const PODS_FILE: &str = "pods.csv";
const NODES_FILE: &str = "nodes.csv";

fn render_job(j: &TraceJob) -> String {
    format!(
        "{} @{} submit {} ran {} {}/{} {}x{} wait {:?} filter {:?}",
        j.id,
        j.line,
        j.submit_ms,
        j.duration_ms,
        j.user,
        j.group,
        j.width,
        j.unit,
        j.trace_wait_ms,
        j.tag_filter
    )
}

fn render_machine(trace: &Trace) -> Option<Vec<String>> {
    trace.machine.as_ref().map(|groups| {
        groups
            .iter()
            .map(|g| format!("{}x{} {:?}", g.count, g.resources, g.tags))
            .collect()
    })
}

fn counts(list: &[(&str, u64)]) -> Vec<(String, u64)> {
    list.iter().map(|&(k, v)| (k.to_string(), v)).collect()
}

fn read(input: &Input) -> Result<Trace, TraceError> {
    match input {
        Input::Swf(text) => parse_swf(text, SWF_FILE),
        Input::Alibaba { pods, nodes } => {
            parse_alibaba(pods, PODS_FILE, nodes.map(|n| (n, NODES_FILE)))
        }
    }
}

/// Runs one case; the mismatches, if any, as text.
fn check(case: &Case) -> Result<(), String> {
    let got = read(&case.input);
    let mut problems = Vec::new();
    match (&case.expect, got) {
        (
            Expect::Trace {
                jobs,
                skipped,
                adjusted,
                machine,
            },
            Ok(trace),
        ) => {
            let format = match case.input {
                Input::Swf(_) => TraceFormat::Swf,
                Input::Alibaba { .. } => TraceFormat::AlibabaGpu,
            };
            if trace.format != format {
                problems.push(format!("format {:?}, expected {format:?}", trace.format));
            }
            let got_jobs: Vec<String> = trace.jobs.iter().map(render_job).collect();
            if got_jobs != *jobs {
                problems.push(format!(
                    "jobs:\n  got      {got_jobs:#?}\n  expected {jobs:#?}"
                ));
            }
            let got_skipped: Vec<(String, u64)> = trace.skipped.clone().into_iter().collect();
            if got_skipped != counts(skipped) {
                problems.push(format!("skipped {got_skipped:?}, expected {skipped:?}"));
            }
            let got_adjusted: Vec<(String, u64)> = trace.adjusted.clone().into_iter().collect();
            if got_adjusted != counts(adjusted) {
                problems.push(format!("adjusted {got_adjusted:?}, expected {adjusted:?}"));
            }
            let expected_machine = machine.map(|m| m.iter().map(|s| s.to_string()).collect());
            if render_machine(&trace) != expected_machine {
                problems.push(format!(
                    "machine {:?}, expected {expected_machine:?}",
                    render_machine(&trace)
                ));
            }
        }
        (
            Expect::Error {
                file,
                line,
                field,
                message,
            },
            Err(e),
        ) => {
            if e.file != *file || e.line != *line || e.field.as_deref() != *field {
                problems.push(format!(
                    "error at {}/{:?}/{:?}, expected {file}/{line:?}/{field:?}: {e}",
                    e.file, e.line, e.field
                ));
            }
            if !e.message.contains(message) {
                problems.push(format!("error {e:?} does not say {message:?}"));
            }
        }
        (Expect::Trace { .. }, Err(e)) => problems.push(format!("unexpected error: {e}")),
        (Expect::Error { .. }, Ok(trace)) => {
            problems.push(format!("no error; read {} jobs", trace.jobs.len()))
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!("case {:?}:\n{}", case.name, problems.join("\n")))
    }
}

/// The SWF header of a 4-node machine with 16 processors, and a few jobs covering the rules:
/// width from requested or allocated processors, -1 fields, decimals, run time 0, skips, and
/// sorting by submit time with ties in file order.
const SWF_VALID: &str = "\
; Version: 2.2
; Computer: test machine
; MaxNodes: 4
; MaxProcs: 16
; Note: a comment: with colons
;
   1  100     5    60   4 -1 -1  4  120 -1 1  3  2 -1 -1 -1 -1 -1
   2   90    -1    30   8 -1 -1 -1   -1 -1 1 -1 -1 -1 -1 -1 -1 -1

   3  100     0     0  -1 -1 -1  2   -1 -1 0  3  2 -1 -1 -1 -1 -1
   4  110     0    -1   2 -1 -1  2   -1 -1 5  4  2 -1 -1 -1 -1 -1
   5  120     0    10  -1 -1 -1 -1   -1 -1 1  4  2 -1 -1 -1 -1 -1
   6  130     0    10   0 -1 -1  0   -1 -1 1  4  2 -1 -1 -1 -1 -1
   7 95.5  1.25  12.5  16 -1 -1 16   -1 -1 1 12.0 7 -1 -1 -1 -1 -1
   8   -1     0    10   1 -1 -1  1   -1 -1 1  4  2 -1 -1 -1 -1 -1
";

/// Fields of an SWF job line.
const SWF_JOB_FIELDS: usize = 18;

const CASES: &[Case] = &[
    Case {
        name: "swf: header machine, decimals, -1 fields, skips, order",
        input: Input::Swf(SWF_VALID),
        expect: Expect::Trace {
            jobs: &[
                "2 @8 submit 0 ran 30000 u?/g? 8x{cpu: 1} wait None filter None",
                "7 @14 submit 5500 ran 12500 u12/g7 16x{cpu: 1} wait Some(1250) filter None",
                "1 @7 submit 10000 ran 60000 u3/g2 4x{cpu: 1} wait Some(5000) filter None",
                "3 @10 submit 10000 ran 0 u3/g2 2x{cpu: 1} wait Some(0) filter None",
            ],
            skipped: &[
                ("no processor count", 2),
                ("run time unknown (-1)", 1),
                ("submit time unknown (-1)", 1),
            ],
            adjusted: &[],
            machine: Some(&["4x{user_slots: 4, cpu: 4} []"]),
        },
    },
    Case {
        name: "swf: MaxProcs not divisible by MaxNodes, fractional processors",
        input: Input::Swf(
            "; MaxNodes: 3\n; MaxProcs: 10\n\
             9 50 0 5 2.5 -1 -1 -1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n",
        ),
        expect: Expect::Trace {
            jobs: &["9 @3 submit 0 ran 5000 u1/g1 3x{cpu: 1} wait Some(0) filter None"],
            skipped: &[],
            adjusted: &[
                ("MaxProcs not divisible by MaxNodes: cpu per node rounded down", 1),
                ("fractional processor count rounded up", 1),
            ],
            machine: Some(&["3x{user_slots: 3, cpu: 3} []"]),
        },
    },
    Case {
        name: "swf: only MaxProcs, one node per processor",
        input: Input::Swf("; MaxProcs: 2\n"),
        expect: Expect::Trace {
            jobs: &[],
            skipped: &[],
            adjusted: &[],
            machine: Some(&["2x{user_slots: 1, cpu: 1} []"]),
        },
    },
    Case {
        name: "swf: MaxProcs below MaxNodes ignores MaxNodes",
        input: Input::Swf("; MaxNodes: 8\n; MaxProcs: 4\n"),
        expect: Expect::Trace {
            jobs: &[],
            skipped: &[],
            adjusted: &[("MaxProcs < MaxNodes: MaxNodes ignored, one node per processor", 1)],
            machine: Some(&["4x{user_slots: 1, cpu: 1} []"]),
        },
    },
    Case {
        name: "swf: only MaxNodes (or -1 values) leaves the machine unknown",
        input: Input::Swf("; MaxNodes: 8\n; MaxProcs: -1\n"),
        expect: Expect::Trace {
            jobs: &[],
            skipped: &[],
            adjusted: &[],
            machine: None,
        },
    },
    Case {
        name: "swf: a job line with 17 fields",
        input: Input::Swf(
            "; MaxProcs: 2\n1 0 0 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 0 0 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1\n",
        ),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(3),
            field: None,
            message: "18 fields, this one has 17",
        },
    },
    Case {
        name: "swf: a field that is not a number names the field",
        input: Input::Swf("\n1 0 0 5m 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(2),
            field: Some("run time"),
            message: "\"5m\" is not a number",
        },
    },
    Case {
        name: "swf: NaN is not a number either",
        input: Input::Swf("1 0 0 5 1 -1 -1 1 -1 -1 1 NaN 1 -1 -1 -1 -1 -1\n"),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(1),
            field: Some("user id"),
            message: "\"NaN\" is not a number",
        },
    },
    Case {
        name: "swf: a header value that is not a number names the header",
        input: Input::Swf("; Version: 2.2\n; MaxProcs: lots\n"),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(2),
            field: Some("MaxProcs"),
            message: "\"lots\" is not a whole number",
        },
    },
    Case {
        name: "swf: a decimal header value is an error too",
        input: Input::Swf("; MaxNodes: 4.5\n"),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(1),
            field: Some("MaxNodes"),
            message: "not a whole number",
        },
    },
    Case {
        name: "swf: a time too large to be one",
        input: Input::Swf("1 1e300 0 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n"),
        expect: Expect::Error {
            file: SWF_FILE,
            line: Some(1),
            field: Some("submit time"),
            message: "too large",
        },
    },
    Case {
        name: "alibaba: pods and nodes",
        input: Input::Alibaba {
            pods: ALIBABA_PODS,
            nodes: Some(ALIBABA_NODES),
        },
        expect: Expect::Trace {
            jobs: &[
                "pod-d @5 submit 0 ran 105000 burstable/burstable 1x{cpu: 40, gpu: 4, memory: 160GiB} wait Some(5000) filter Some(\"G2\")",
                "pod-a @2 submit 10000 ran 300000 ls/ls 1x{cpu: 8, gpu: 1, memory: 8GiB} wait Some(0) filter None",
                "pod-b @3 submit 60000 ran 140000 be/be 1x{cpu: 6.01, gpu: 1, memory: 1GiB} wait Some(10000) filter Some(\"V100M16 | V100M32\")",
                "pod-e @6 submit 60000 ran 1500 ls/ls 1x{cpu: 0.5, memory: 512MiB} wait Some(0) filter None",
            ],
            skipped: &[
                ("never scheduled", 1),
                ("still running at the end of the trace", 1),
            ],
            adjusted: &[
                ("cpu rounded up to 0.01", 1),
                ("fractional GPU rounded up to 1", 1),
                ("gpu_spec of a pod without GPU ignored", 1),
                ("node cpu rounded down to 0.01", 1),
            ],
            machine: Some(&[
                "2x{user_slots: 256, cpu: 16, memory: 64GiB} []",
                "2x{user_slots: 256, cpu: 48, gpu: 8, memory: 192GiB} [\"G2\"]",
                "1x{user_slots: 256, cpu: 64, gpu: 8, memory: 512GiB} [\"V100M32\"]",
                "1x{user_slots: 256, cpu: 8, gpu: 1, memory: 1GiB} [\"T4\"]",
            ]),
        },
    },
    Case {
        name: "alibaba: columns by name, in another order, extra ones ignored, no node list",
        input: Input::Alibaba {
            pods: "\
creation_time,scheduled_time,deletion_time,extra,qos,gpu_spec,gpu_milli,num_gpu,memory_mib,cpu_milli,name
5,7,17,x,,nan,1000,2,0.5,1000,p1
",
            nodes: None,
        },
        expect: Expect::Trace {
            jobs: &[
                "p1 @2 submit 0 ran 10000 ?/? 1x{cpu: 1, gpu: 2, memory: 512KiB} wait Some(2000) filter None",
            ],
            skipped: &[],
            adjusted: &[],
            machine: None,
        },
    },
    Case {
        name: "alibaba: the multigpu50 variant has no times: a clear error",
        input: Input::Alibaba {
            pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli\npod-1,2000,4096,1,500\n",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(1),
            field: None,
            message: "missing columns gpu_spec, qos, creation_time, deletion_time, scheduled_time (the header has: name, cpu_milli, memory_mib, num_gpu, gpu_milli)",
        },
    },
    Case {
        name: "alibaba: one missing column",
        input: Input::Alibaba {
            pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,deletion_time,scheduled_time\n",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(1),
            field: None,
            message: "missing column creation_time (",
        },
    },
    Case {
        name: "alibaba: a bad number names line and column",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,0,0,,LS,Running,0,10,0
p2,12k,512,0,0,,LS,Running,0,10,0
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(3),
            field: Some("cpu_milli"),
            message: "\"12k\" is not a number",
        },
    },
    Case {
        name: "alibaba: a negative amount",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,-512,0,0,,LS,Running,0,10,0
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("memory_mib"),
            message: "-512 is negative",
        },
    },
    Case {
        name: "alibaba: a fractional GPU count",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,1.5,0,,LS,Running,0,10,0
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("num_gpu"),
            message: "1.5 is not a whole number",
        },
    },
    Case {
        name: "alibaba: deleted before scheduled",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,0,0,,LS,Running,0,10,20
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("deletion_time"),
            message: "before scheduled_time",
        },
    },
    Case {
        name: "alibaba: scheduled before created",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,0,0,,LS,Running,30,40,20
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("scheduled_time"),
            message: "before creation_time",
        },
    },
    Case {
        name: "alibaba: no creation time",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,0,0,,LS,Running,,40,20
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("creation_time"),
            message: "empty",
        },
    },
    Case {
        name: "alibaba: a gpu_spec model that is not a tag",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,1,1000,V100M16|Tesla V100,LS,Running,0,10,0
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("gpu_spec"),
            message: "GPU model \"Tesla V100\" is not a valid tag",
        },
    },
    Case {
        name: "alibaba: a gpu_spec with an operator",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,1,1000,!T4,LS,Running,0,10,0
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(2),
            field: Some("gpu_spec"),
            message: "\"!T4\" is not a valid tag",
        },
    },
    Case {
        name: "alibaba: a row with a column too many",
        input: Input::Alibaba {
            pods: "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
p1,1000,512,0,0,,LS,Running,0,10,0
p2,1000,512,0,0,,LS,Running,0,10,0,9
",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: Some(3),
            field: None,
            message: "the header has 11 columns, this row has 12",
        },
    },
    Case {
        name: "alibaba: a node model that is not a tag names the node file",
        input: Input::Alibaba {
            pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
            nodes: Some("sn,cpu_milli,memory_mib,gpu,model\nn0,8000,1024,1,T4\nn1,8000,1024,1,A100 (80GB)\n"),
        },
        expect: Expect::Error {
            file: NODES_FILE,
            line: Some(3),
            field: Some("model"),
            message: "GPU model \"A100 (80GB)\" is not a valid tag",
        },
    },
    Case {
        name: "alibaba: a node list without nodes",
        input: Input::Alibaba {
            pods: "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n",
            nodes: Some("sn,cpu_milli,memory_mib,gpu,model\n"),
        },
        expect: Expect::Error {
            file: NODES_FILE,
            line: None,
            field: None,
            message: "no nodes",
        },
    },
    Case {
        name: "alibaba: an empty pod file",
        input: Input::Alibaba {
            pods: "",
            nodes: None,
        },
        expect: Expect::Error {
            file: PODS_FILE,
            line: None,
            field: None,
            message: "empty file (expected a header: name,cpu_milli,",
        },
    },
];

/// Pods covering the rules: a whole GPU, a shared GPU with cpu to round and a gpu_spec, a pod
/// never scheduled, a multi-GPU pod (the earliest: times become relative to it), a CPU pod with
/// a gpu_spec (ignored) created at the same time as pod-b (file order kept), a pod with no
/// deletion time.
const ALIBABA_PODS: &str = "\
name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time
pod-a,8000,8192,1,1000,,LS,Running,100,400,100
pod-b,6005,1024,1,460,V100M16|V100M32,BE,Running,150,300,160
pod-c,4000,2048,0,0,,BE,Pending,120,130,
pod-d,40000,163840,4,1000,G2,Burstable,Succeeded,90,200,95
pod-e,500,512,0,0,T4,LS,Running,150,151.5,150
pod-f,500,512,0,0,,LS,Running,10,,10
";

/// Nodes: two identical CPU nodes apart, G2 nodes around a V100M32 one, and a T4 node whose cpu
/// is rounded down.
const ALIBABA_NODES: &str = "\
sn,cpu_milli,memory_mib,gpu,model
n0,16000,65536,0,
n1,48000,196608,8,G2
n2,16000,65536,0,
n3,64000,524288,8,V100M32
n4,48000,196608,8,G2
n5,8005,1024,1,T4
";

#[test]
fn cases() {
    let failures: Vec<String> = CASES.iter().filter_map(|c| check(c).err()).collect();
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n\n")
    );
}

#[test]
fn every_swf_field_that_is_not_a_number_is_named() {
    let names = fairsched_sim::trace::swf::FIELD_NAMES;
    assert_eq!(names.len(), SWF_JOB_FIELDS);
    for (i, name) in names.iter().enumerate() {
        let mut fields = vec!["1"; SWF_JOB_FIELDS];
        fields[i] = "x";
        let text = format!("; MaxProcs: 4\n{}\n", fields.join(" "));
        let e = parse_swf(&text, SWF_FILE).expect_err(name);
        assert_eq!(
            e.to_string(),
            format!("{SWF_FILE}:2: field {name}: \"x\" is not a number")
        );
    }
}

#[test]
fn errors_display_the_parts_they_have() {
    let cases = [
        (Some(3), Some("run time"), "f.swf:3: field run time: bad"),
        (Some(3), None, "f.swf:3: bad"),
        (None, Some("MaxProcs"), "f.swf: field MaxProcs: bad"),
        (None, None, "f.swf: bad"),
    ];
    for (line, field, shown) in cases {
        let e = TraceError {
            file: "f.swf".into(),
            line,
            field: field.map(String::from),
            message: "bad".into(),
        };
        assert_eq!(e.to_string(), shown);
    }
}

#[test]
fn formats_parse_by_name_and_are_detected_by_file_name() {
    for format in TraceFormat::ALL {
        assert_eq!(format.name().parse::<TraceFormat>(), Ok(format));
        assert_eq!(format.to_string(), format.name());
    }
    for bad in ["SWF", "alibaba", ""] {
        let e = bad.parse::<TraceFormat>().expect_err(bad);
        assert_eq!(
            e,
            format!("unknown trace format {bad:?} (accepted: swf, alibaba-gpu)")
        );
    }
    let detect = [
        ("KTH-SP2-1996-2.1-cln.swf", Some(TraceFormat::Swf)),
        ("/data/KTH-SP2-1996-2.1-cln.swf.gz", Some(TraceFormat::Swf)),
        ("TRACE.SWF.GZ", Some(TraceFormat::Swf)),
        (
            "dir/openb_pod_list_default.csv",
            Some(TraceFormat::AlibabaGpu),
        ),
        ("pods.CSV", Some(TraceFormat::AlibabaGpu)),
        ("trace.gz", None),
        ("trace.txt", None),
        ("swf", None),
        ("pods.csv.gz", None),
        ("swf.d/", None),
    ];
    for (path, expected) in detect {
        assert_eq!(TraceFormat::detect(Path::new(path)), expected, "{path}");
    }
}

/// Small SWF text for the file tests.
const SWF_SMALL: &str = "; MaxNodes: 2\n; MaxProcs: 4\n1 10 0 5 1 -1 -1 1 -1 -1 1 1 1 -1 -1 -1 -1 -1\n\
                         2 20 0 5 2 -1 -1 2 -1 -1 1 2 1 -1 -1 -1 -1 -1\n";

fn gzip(text: &str) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(text.as_bytes()).unwrap();
    encoder.finish().unwrap()
}

#[test]
fn gzip_swf_files_load_like_their_text() {
    let dir = tempfile::tempdir().unwrap();
    let expected = parse_swf(SWF_SMALL, "x").unwrap();
    assert_eq!(expected.jobs.len(), 2);
    // By name (.swf.gz), and by content whatever the name says; plain text too.
    let files: [(&str, Vec<u8>); 3] = [
        ("trace.swf.gz", gzip(SWF_SMALL)),
        ("trace.swf", gzip(SWF_SMALL)),
        ("plain.swf", SWF_SMALL.as_bytes().to_vec()),
    ];
    for (name, bytes) in files {
        let path = dir.path().join(name);
        std::fs::write(&path, bytes).unwrap();
        let trace = load(&path, None).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(trace, expected, "{name}");
    }
}

#[test]
fn load_needs_a_known_format_and_a_readable_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("trace.log");
    std::fs::write(&path, SWF_SMALL).unwrap();
    let e = load(&path, None).expect_err("no format from the name");
    assert_eq!(e.line, None);
    assert!(
        e.message.contains("give the format (swf, alibaba-gpu)"),
        "{e}"
    );
    assert_eq!(load(&path, Some(TraceFormat::Swf)).unwrap().jobs.len(), 2);

    let missing = dir.path().join("missing.swf");
    let e = load(&missing, None).expect_err("missing file");
    assert_eq!(e.file, missing.display().to_string());
    assert!(e.message.starts_with("cannot read: "), "{e}");

    let corrupt = dir.path().join("corrupt.swf.gz");
    let mut bytes = gzip(SWF_SMALL);
    bytes.truncate(bytes.len() / 2);
    std::fs::write(&corrupt, bytes).unwrap();
    let e = load(&corrupt, None).expect_err("truncated gzip");
    assert!(e.message.starts_with("cannot decompress (gzip): "), "{e}");
}

#[test]
fn alibaba_load_reads_the_node_list_beside_the_pods() {
    let dir = tempfile::tempdir().unwrap();
    let pods = dir.path().join("openb_pod_list_default.csv");
    std::fs::write(&pods, ALIBABA_PODS).unwrap();

    let alone = load(&pods, None).unwrap();
    assert_eq!(alone.format, TraceFormat::AlibabaGpu);
    assert_eq!(alone.machine, None);
    assert_eq!(alone.jobs.len(), 4);

    let nodes = dir.path().join(fairsched_sim::trace::ALIBABA_NODE_LIST);
    std::fs::write(&nodes, ALIBABA_NODES).unwrap();
    let with_nodes = load(&pods, None).unwrap();
    let expected = parse_alibaba(ALIBABA_PODS, "x", Some((ALIBABA_NODES, "y"))).unwrap();
    assert_eq!(with_nodes, expected);
    assert_eq!(with_nodes.machine.as_ref().map(Vec::len), Some(4));

    // An error in the node list names that file.
    std::fs::write(&nodes, "sn,cpu_milli,memory_mib,gpu,model\nn0,x,1,0,\n").unwrap();
    let e = load(&pods, None).expect_err("bad node list");
    assert_eq!(e.file, nodes.display().to_string());
    assert_eq!((e.line, e.field.as_deref()), (Some(2), Some("cpu_milli")));
}

#[test]
fn swf_requested_time_becomes_the_time_limit() {
    // (requested time field, the limit): 0 and -1 mean none.
    let cases = [
        ("3600", Some(3_600_000)),
        ("1.5", Some(1_500)),
        ("0", None),
        ("-1", None),
    ];
    for (requested, expected) in cases {
        let text = format!("1 0 5 60 4 -1 -1 4 {requested} -1 1 7 3 -1 -1 -1 -1 -1\n");
        let trace = parse_swf(&text, SWF_FILE).expect(requested);
        assert_eq!(trace.jobs[0].time_limit_ms, expected, "{requested}");
    }
    let e = parse_swf(
        "1 0 5 60 4 -1 -1 4 1e300 -1 1 7 3 -1 -1 -1 -1 -1\n",
        SWF_FILE,
    )
    .expect_err("too large");
    assert_eq!(e.field.as_deref(), Some("requested time"), "{e}");
}

/// A requested time over ten years ("unlimited" written as 2^31 - 1 s in CEA-Curie) is taken
/// as ten years, the scheduler's longest time limit (the job would otherwise fail), and
/// counted as adjusted.
#[test]
fn requested_times_over_ten_years_are_capped() {
    let text = "; MaxNodes: 1\n; MaxProcs: 4\n\
        1 0 0 5 1 -1 -1 1 2147483647 -1 1 1 1 -1 -1 -1 -1 -1\n\
        2 0 0 5 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n";
    let trace = fairsched_sim::trace::parse_swf(text, "t.swf").unwrap();
    let limits: Vec<Option<u64>> = trace.jobs.iter().map(|j| j.time_limit_ms).collect();
    assert_eq!(
        limits,
        [Some(fairsched_core::MAX_DURATION_MS), Some(60_000)]
    );
    assert_eq!(
        trace
            .adjusted
            .get(fairsched_sim::trace::swf::ADJUST_REQUESTED_TIME_CAPPED)
            .copied(),
        Some(1)
    );
}
