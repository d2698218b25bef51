package rundir

// The names of the training loop's metrics in metrics.jsonl, kept here
// with the records they are written into, so that what reads a run
// (rlvr report) names them without compiling what wrote them.

// The metrics of a step's sampled groups, which the RL method logs
// (package method).
const (
	MetricRewardMean      = "reward_mean"
	MetricRewardStd       = "reward_std"
	MetricResponseLenMean = "response_len_mean" // in tokens
	// MetricTruncatedFrac is the share of answers the token budget cut off
	// (TRL's completions/clipped_ratio).
	MetricTruncatedFrac = "truncated_frac"
	// MetricAccuracy and MetricZeroVarianceFrac, the share of groups whose
	// answers are all right or all wrong, are also logged per variant,
	// after method.VariantPrefix.
	MetricAccuracy         = "accuracy"
	MetricZeroVarianceFrac = "zero_variance_frac"
	// MetricKL is the mean per-token KL to the reference model, in the
	// reward or in the loss (the loop logs it then).
	MetricKL = "kl"
)

// The loop's metrics, beside the method's in each line of metrics.jsonl
// (package train).
const (
	// MetricStepSeconds is the whole step's time; MetricRolloutSeconds,
	// MetricVerifySeconds and MetricLearnSeconds its parts: sampling (a
	// method's extra passes included), rewarding, and the learner's
	// passes and optimizer steps.
	MetricStepSeconds    = "step_s"
	MetricRolloutSeconds = "time_rollout_s"
	MetricVerifySeconds  = "time_verify_s"
	MetricLearnSeconds   = "time_learn_s"
	// MetricSkippedUpdate is 1 on a step that trained nothing.
	MetricSkippedUpdate = "skipped_update"
	// MetricClipLowFrac and MetricClipHighFrac are the shares of tokens
	// whose probability ratio the objective clipped below 1−ε and above
	// 1+ε.
	MetricClipLowFrac  = "clip_low_frac"
	MetricClipHighFrac = "clip_high_frac"
	MetricEntropy      = "entropy" // mean per token
	// MetricGradNorm is the shared update's gradient norm; a term with a
	// learning rate of its own logs its own under MetricGradNorm/<term>.
	MetricGradNorm     = "grad_norm"
	MetricLR           = "lr"
	MetricTokensPerSec = "tokens_per_sec" // through the learner
)
