package interop_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/yomorun/yomo/serverless"

	"github.com/y3-dev/y3/interop/yomo/internal/harness"
)

// Devices over MQTT (issue 31): a sensor's mosquitto_pub → `y3 serve` ([mqtt]) → a YoMo
// v1.22 stream function (the real SDK) that reads which device spoke from metadata
// `mqtt-topic` → an MQTT subscriber (mosquitto_sub), exact counts at QoS 0 and 1.
//
// y3 only: YoMo's zipper has no MQTT listener, so there is no YoMo control for this path
// (its MQTT path is a broker plus a bridge process, which the lab measures:
// `y3-lab net mqtt`). mosquitto-clients are installed by scripts/test-mqtt.sh; a missing
// tool fails the test.
func TestMQTTSensorToYoMoFunctionToMQTTSubscriber(t *testing.T) {
	for _, tool := range []string{"mosquitto_pub", "mosquitto_sub"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing: install Debian's mosquitto-clients (scripts/test-mqtt.sh does)", tool)
		}
	}
	mqttPort := freeTCPPort(t)
	r := harness.Start(t, harness.Y3, harness.Options{Config: fmt.Sprintf(`[mqtt]
listen = "127.0.0.1:%d"
[[mqtt.publish]]
topic = "sensors/+/noise"
tag = 0x10
[[mqtt.subscribe]]
tag = 0x20
topic = "alerts/noise"
`, mqttPort)})

	// The stream function: which device spoke (mqtt-topic), and its reading, as an alert.
	var noTopic atomic.Int64
	fn := connectWriter(t, r, "noise-by-device", []uint32{0x10}, func(_ *writer, ctx serverless.Context) {
		topic, ok := ctx.Metadata("mqtt-topic")
		if !ok {
			noTopic.Add(1)
		}
		device := strings.Split(topic, "/")[1]
		_ = ctx.Write(0x20, []byte(device+":"+string(ctx.Data())))
	})

	const n = 300
	for _, qos := range []string{"0", "1"} {
		t.Run("qos"+qos, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			sub := exec.CommandContext(ctx, "mosquitto_sub", "-h", "127.0.0.1", "-p", fmt.Sprint(mqttPort),
				"-t", "alerts/#", "-q", "1", "-C", fmt.Sprint(2*n), "-W", "60")
			out, err := sub.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := sub.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // subscribed (a generous bound on a loaded machine)
			want := []string{}
			for _, device := range []string{"kitchen", "garage"} {
				var lines strings.Builder
				for i := 0; i < n; i++ {
					fmt.Fprintf(&lines, "%s-q%s-%d\n", device, qos, i)
					want = append(want, fmt.Sprintf("%s:%s-q%s-%d", device, device, qos, i))
				}
				pub := exec.CommandContext(ctx, "mosquitto_pub", "-h", "127.0.0.1", "-p", fmt.Sprint(mqttPort),
					"-t", "sensors/"+device+"/noise", "-q", qos, "-l")
				pub.Stdin = strings.NewReader(lines.String())
				if b, err := pub.CombinedOutput(); err != nil {
					t.Fatalf("mosquitto_pub: %v: %s", err, b)
				}
			}
			var got []string
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				got = append(got, sc.Text())
			}
			if err := sub.Wait(); err != nil {
				t.Fatalf("mosquitto_sub: %v after %d of %d", err, len(got), 2*n)
			}
			// Each exactly once (YoMo's SDK runs handlers concurrently: order is not kept).
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Errorf("got %d alerts, want exactly %d, each once; first difference near %v", len(got), len(want), firstDiff(got, want))
			}
		})
	}
	if noTopic.Load() != 0 || fn.inputs.Load() != 4*n {
		t.Errorf("function saw %d frames (want %d), %d without mqtt-topic", fn.inputs.Load(), 4*n, noTopic.Load())
	}
}

func freeTCPPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func firstDiff(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("#%d: got %q want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("lengths %d vs %d", len(got), len(want))
}
