//! `nsys-lens mfu REPORT... [WINDOW] [--peak-tflops T] [--model-flops-per-step N]`

use super::Outcome;
use super::analysis::RankArgs;
use nsys_lens::query::mfu::{MfuOptions, mfu};

/// Options of `mfu`.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:
  nsys-lens mfu --whole traces/                        FLOPs and MFU per step and family (torch.profiler, record_shapes=True)
  nsys-lens mfu --whole train.sqlite                   from nsys profile --pytorch=autograd-shapes-nvtx
  nsys-lens mfu --whole --peak-tflops 989 traces/      against a peak of your own
  nsys-lens mfu --whole --model-flops-per-step 6e12 traces/   a model-level MFU too")]
pub struct Args {
    #[command(flatten)]
    r: RankArgs,

    /// A peak TFLOP/s for every GPU and precision, instead of the datasheet table's.
    #[arg(long, value_name = "TFLOPS")]
    peak_tflops: Option<f64>,

    /// The model's FLOPs per step (6 x parameters x tokens, for a transformer's training
    /// step): a model-level MFU per rank and step, in the notes.
    #[arg(long, value_name = "FLOPS")]
    model_flops_per_step: Option<f64>,
}

/// Prints FLOPs, achieved TFLOP/s and MFU per rank, step and family.
pub fn run(args: Args) -> anyhow::Result<Outcome> {
    let options = MfuOptions {
        peak_tflops: args.peak_tflops,
        model_flops_per_step: args.model_flops_per_step,
    };
    (args.r).print_query(|loaded, selection| mfu(loaded, selection, options))
}
