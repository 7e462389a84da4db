package link

import (
	"strings"
	"testing"
)

func TestPipelineChainsRateQueueAndDelay(t *testing.T) {
	config := Config{
		DelayNs:           10 * millisecondNs,
		RateBitsPerSecond: 12_000_000, // 1500 bytes in 1 ms
		Queue:             QueueConfig{Discipline: DropTail, LimitPackets: 2},
	}
	var recycled []*Packet
	pipeline, err := NewPipeline(config, 0, func(p *Packet) { recycled = append(recycled, p) })
	if err != nil {
		t.Fatal(err)
	}
	packets := newTestPackets(1500, 1500, 1500, 1500, 1500)
	for _, p := range packets {
		pipeline.Enqueue(p, 0)
	}
	// One on the wire, two queued, two dropped by the full queue.
	if len(recycled) != 2 || recycled[0] != packets[3] || recycled[1] != packets[4] {
		t.Fatalf("recycled %d packets, want packets 3 and 4", len(recycled))
	}
	wantNs := []int64{11 * millisecondNs, 12 * millisecondNs, 13 * millisecondNs}
	for i, want := range wantNs {
		readyNs, ok := pipeline.NextReadyNs()
		if !ok || readyNs != want {
			t.Fatalf("NextReadyNs = %d, %v; want %d (the rate's departure plus the delay)", readyNs, ok, want)
		}
		if p := pipeline.Dequeue(want - 1); p != nil {
			t.Fatalf("a packet left at %d ns, before its time %d ns", want-1, want)
		}
		p := pipeline.Dequeue(want)
		if p != packets[i] || p.TimeNs != want || p.ArrivalNs != 0 {
			t.Fatalf("Dequeue(%d) = %+v, want packet %d leaving at %d", want, p, i, want)
		}
	}
	if _, ok := pipeline.NextReadyNs(); ok {
		t.Error("an empty pipeline reports a next packet")
	}
	want := Counters{PacketsIn: 5, BytesIn: 7500, PacketsOut: 3, BytesOut: 4500, PacketsDroppedQueue: 2, BytesDroppedQueue: 3000}
	if got := pipeline.Counters(); got != want {
		t.Errorf("Counters = %+v, want %+v", got, want)
	}
}

func TestPipelineAskedLateKeepsPacketTimes(t *testing.T) {
	// A caller that looks only at 100 ms still sees each packet's own time: moving between
	// stages late must not add delay.
	config := Config{DelayNs: 10 * millisecondNs, RateBitsPerSecond: 12_000_000}
	pipeline, err := NewPipeline(config, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range newTestPackets(1500, 1500, 1500) {
		pipeline.Enqueue(p, int64(i)*100_000)
	}
	for i, want := range []int64{11, 12, 13} {
		p := pipeline.Dequeue(100 * millisecondNs)
		if p == nil || p.TimeNs != want*millisecondNs {
			t.Fatalf("packet %d: %+v, want TimeNs %d ms", i, p, want)
		}
	}
}

func TestPipelineCountsLoss(t *testing.T) {
	config := Config{DelayNs: millisecondNs, Loss: LossConfig{Model: LossBernoulli, Probability: 0.2}, Seed: 5}
	recycled := 0
	pipeline, err := NewPipeline(config, 0, func(*Packet) { recycled++ })
	if err != nil {
		t.Fatal(err)
	}
	const packets = 1000
	for i := range packets {
		pipeline.Enqueue(&Packet{Data: make([]byte, 100)}, int64(i))
	}
	out := len(drain(pipeline, 2*millisecondNs))
	counters := pipeline.Counters()
	if counters.PacketsDroppedLoss == 0 || counters.PacketsDroppedQueue != 0 {
		t.Fatalf("counters %+v: want loss drops and no queue drops", counters)
	}
	if int64(out) != counters.PacketsOut || counters.PacketsOut+counters.PacketsDroppedLoss != packets ||
		counters.BytesDroppedLoss != 100*counters.PacketsDroppedLoss || int64(recycled) != counters.PacketsDroppedLoss {
		t.Errorf("counters %+v, %d out, %d recycled: they do not add up to %d packets", counters, out, recycled, packets)
	}
	if counters.PacketsInside() != 0 {
		t.Errorf("PacketsInside = %d after draining", counters.PacketsInside())
	}
}

func TestPipelineFollowsATrace(t *testing.T) {
	trace := &DeliveryTrace{Name: "test", OpportunitiesMs: []int64{5}}
	pipeline, err := NewPipeline(Config{DelayNs: 1_500_000, Trace: trace}, 100*millisecondNs, nil)
	if err != nil {
		t.Fatal(err)
	}
	pipeline.Enqueue(newTestPackets(1000)[0], 101*millisecondNs)
	// The trace started at 100 ms: opportunities at 105, 110, ... ms.
	p := pipeline.Dequeue(200 * millisecondNs)
	if p == nil || p.TimeNs != 106_500_000 {
		t.Fatalf("packet %+v, want TimeNs 106.5 ms", p)
	}
}

func TestPipelineTimeNeverGoesBack(t *testing.T) {
	pipeline, err := NewPipeline(Config{DelayNs: 1000, RateBitsPerSecond: 8e9}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := pipeline.Dequeue(5000); p != nil {
		t.Fatal("an empty pipeline returned a packet")
	}
	// Stamped before the last Dequeue (readers and the scheduler race): taken as 5000.
	pipeline.Enqueue(newTestPackets(1000)[0], 4000)
	if p := pipeline.Dequeue(1 << 40); p == nil || p.ArrivalNs != 5000 || p.TimeNs != 5000+1000+1000 {
		t.Fatalf("packet %+v, want arrival 5000 and exit 7000", p)
	}
}

func TestConfigValidate(t *testing.T) {
	trace := &DeliveryTrace{Name: "t", OpportunitiesMs: []int64{1}}
	tests := []struct {
		name      string
		config    Config
		wantError string // "" for valid
	}{
		{"zero value is a plain wire", Config{}, ""},
		{"full", Config{DelayNs: 1, Jitter: Jitter{SpreadNs: 1}, RateBitsPerSecond: 1, Queue: QueueConfig{LimitPackets: 1},
			Loss: LossConfig{Model: LossBernoulli, Probability: 0.5}}, ""},
		{"negative delay", Config{DelayNs: -1}, "delay -1ns is negative"},
		{"negative jitter", Config{Jitter: Jitter{SpreadNs: -5}}, "jitter -5ns is negative"},
		{"negative rate", Config{RateBitsPerSecond: -1}, "rate -1 bit/s is negative"},
		{"rate and trace", Config{RateBitsPerSecond: 1, Trace: trace}, "choose one"},
		{"queue without bottleneck", Config{Queue: QueueConfig{LimitBytes: 1000}}, "without a rate or trace"},
		{"negative queue", Config{RateBitsPerSecond: 1, Queue: QueueConfig{LimitPackets: -1}}, "negative"},
		{"loss of 1", Config{Loss: LossConfig{Model: LossBernoulli, Probability: 1}}, "outside [0, 1)"},
		{"bad trace", Config{Trace: &DeliveryTrace{Name: "x"}}, "no delivery opportunities"},
		{"every problem is reported", Config{DelayNs: -1, RateBitsPerSecond: -1}, "rate -1 bit/s"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			err := test.config.Validate()
			if test.wantError == "" {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), test.wantError) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, test.wantError)
			}
			if _, err := NewPipeline(test.config, 0, nil); err == nil {
				t.Error("NewPipeline accepted a config Validate rejects")
			}
		})
	}
}

func TestConfigString(t *testing.T) {
	config := Config{
		DelayNs:           70 * millisecondNs,
		RateBitsPerSecond: 10_000_000,
		Queue:             QueueConfig{Discipline: DropTail, LimitPackets: 64},
		Loss:              LossConfig{Model: LossBernoulli, Probability: 0.01},
	}
	want := "delay 70ms, rate 10 Mbit/s, queue drop-tail, 64 packets, loss bernoulli 1%"
	if got := config.String(); got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

// BenchmarkPipeline measures the cost of one packet through loss, a 10 Gbit/s bottleneck
// with a finite queue, and a 10 ms delay, at 1 µs spacing (a steady 10 ms of packets
// inside).
func BenchmarkPipeline(b *testing.B) {
	config := Config{
		DelayNs:           10 * millisecondNs,
		RateBitsPerSecond: 10_000_000_000,
		Queue:             QueueConfig{Discipline: DropTail, LimitBytes: 1 << 20},
		Loss:              LossConfig{Model: LossBernoulli, Probability: 0.001},
		Seed:              1,
	}
	free := make([]*Packet, 0, 16384)
	pipeline, err := NewPipeline(config, 0, func(p *Packet) { free = append(free, p) })
	if err != nil {
		b.Fatal(err)
	}
	for range 16384 {
		free = append(free, &Packet{Data: make([]byte, 1500)})
	}
	b.SetBytes(1500)
	b.ReportAllocs()
	nowNs := int64(0)
	for b.Loop() {
		nowNs += 1000
		p := free[len(free)-1]
		free = free[:len(free)-1]
		pipeline.Enqueue(p, nowNs)
		for out := pipeline.Dequeue(nowNs); out != nil; out = pipeline.Dequeue(nowNs) {
			free = append(free, out)
		}
	}
}
