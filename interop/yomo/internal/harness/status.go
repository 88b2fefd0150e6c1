package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Status is a router with y3's JSON status endpoints (/varz, /connz, /tagz on its metrics
// listener); YoMo's zipper has none.
type Status interface {
	// Status decodes the JSON document at path (e.g. "/connz?sort=name") into v.
	Status(path string, v any) error
}

// Status decodes y3's JSON status document at path into v.
func (r *y3Router) Status(path string, v any) error {
	r.mu.Lock()
	metrics := r.metrics
	r.mu.Unlock()
	if metrics == "" {
		return fmt.Errorf("y3 serve is not running")
	}
	url := strings.TrimSuffix(metrics, "/metrics") + path
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("GET %s: %v in %s", url, err, body)
	}
	return nil
}
