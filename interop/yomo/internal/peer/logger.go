package peer

import (
	"log/slog"
	"os"

	"github.com/yomorun/yomo/core/ylog"
)

// Logger returns YoMo's own logger (ylog) configured from YoMo's environment variables, with
// two different defaults: level `error` (YOMO_LOG_LEVEL; YoMo's default `info` logs every
// routed frame and doubles the zipper's CPU per message) and output stderr
// (YOMO_LOG_OUTPUT; YoMo's default is stdout, which carries this module's JSON reports).
func Logger() *slog.Logger {
	return ylog.NewFromConfig(ylog.Config{
		Level:       envOr("YOMO_LOG_LEVEL", "error"),
		Output:      envOr("YOMO_LOG_OUTPUT", "stderr"),
		ErrorOutput: envOr("YOMO_LOG_ERROR_OUTPUT", "stderr"),
		Format:      os.Getenv("YOMO_LOG_FORMAT"),
		Verbose:     os.Getenv("YOMO_LOG_VERBOSE") == "true",
	})
}

func envOr(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
