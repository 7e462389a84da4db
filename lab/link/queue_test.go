package link

import (
	"strings"
	"testing"
)

func TestQueueDisciplines(t *testing.T) {
	tests := []struct {
		name        string
		config      QueueConfig
		sizes       []int
		wantDropped []int // indexes of dropped packets, in drop order
		wantKept    []int // indexes left in the queue, oldest first
	}{
		{"unlimited", QueueConfig{}, []int{1500, 1500, 1500}, nil, []int{0, 1, 2}},
		{"drop-tail by packets", QueueConfig{Discipline: DropTail, LimitPackets: 2},
			[]int{100, 100, 100, 100}, []int{2, 3}, []int{0, 1}},
		{"drop-head by packets", QueueConfig{Discipline: DropHead, LimitPackets: 2},
			[]int{100, 100, 100, 100}, []int{0, 1}, []int{2, 3}},
		{"drop-tail by bytes", QueueConfig{Discipline: DropTail, LimitBytes: 3000},
			[]int{1000, 1500, 1000, 500}, []int{2}, []int{0, 1, 3}},
		{"drop-head by bytes drops as many as needed", QueueConfig{Discipline: DropHead, LimitBytes: 3000},
			[]int{1000, 1000, 1000, 1500}, []int{0, 1}, []int{2, 3}},
		{"drop-head drops a packet larger than the whole limit", QueueConfig{Discipline: DropHead, LimitBytes: 1000},
			[]int{500, 1500}, []int{0, 1}, nil},
		{"both limits: the tighter one counts", QueueConfig{Discipline: DropTail, LimitBytes: 10_000, LimitPackets: 3},
			[]int{100, 100, 100, 100}, []int{3}, []int{0, 1, 2}},
		{"exactly full is not over the limit", QueueConfig{Discipline: DropTail, LimitBytes: 3000},
			[]int{1500, 1500}, nil, []int{0, 1}},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			queue := NewQueue(test.config)
			packets := newTestPackets(test.sizes...)
			var dropped []*Packet
			for _, p := range packets {
				dropped = queue.Enqueue(p, dropped)
			}
			var droppedIndexes, keptIndexes []int
			for _, p := range dropped {
				droppedIndexes = append(droppedIndexes, indexOf(t, packets, p))
			}
			var keptBytes int64
			for _, i := range test.wantKept {
				keptBytes += int64(test.sizes[i])
			}
			if queue.Bytes() != keptBytes || queue.Len() != len(test.wantKept) {
				t.Errorf("queue holds %d packets, %d bytes; want %d, %d", queue.Len(), queue.Bytes(), len(test.wantKept), keptBytes)
			}
			for p := queue.Dequeue(); p != nil; p = queue.Dequeue() {
				keptIndexes = append(keptIndexes, indexOf(t, packets, p))
			}
			if !equalInts(droppedIndexes, test.wantDropped) {
				t.Errorf("dropped %v, want %v", droppedIndexes, test.wantDropped)
			}
			if !equalInts(keptIndexes, test.wantKept) {
				t.Errorf("kept %v, want %v", keptIndexes, test.wantKept)
			}
			if queue.Bytes() != 0 {
				t.Errorf("an empty queue counts %d bytes", queue.Bytes())
			}
		})
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestDefaultQueue(t *testing.T) {
	tests := []struct {
		name              string
		rateBitsPerSecond int64
		rttNs             int64
		wantLimitBytes    int64
		wantDescription   string
	}{
		{"one BDP", 10_000_000, 140 * millisecondNs, 175_000, "queue: drop-tail, 1 BDP = 175 KB"},
		{"BDP of 10.5 KB is below the floor", 1_200_000, 70 * millisecondNs, 15_000,
			"queue: drop-tail, 10 packets = 15 KB (floor; 1 BDP = 10.5 KB)"},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			config, description := DefaultQueue(test.rateBitsPerSecond, test.rttNs, 1500)
			if config.LimitBytes != test.wantLimitBytes || config.Discipline != DropTail || config.LimitPackets != 0 {
				t.Errorf("DefaultQueue = %+v, want drop-tail %d bytes", config, test.wantLimitBytes)
			}
			if description != test.wantDescription {
				t.Errorf("description %q, want %q", description, test.wantDescription)
			}
		})
	}
}

func TestParseQueueDiscipline(t *testing.T) {
	for input, want := range map[string]QueueDiscipline{"drop-tail": DropTail, "DropHead": DropHead, "drop_head": DropHead} {
		if got, err := ParseQueueDiscipline(input); err != nil || got != want {
			t.Errorf("ParseQueueDiscipline(%q) = %v, %v; want %v", input, got, err, want)
		}
	}
	if _, err := ParseQueueDiscipline("red"); err == nil || !strings.Contains(err.Error(), "drop-tail or drop-head") {
		t.Errorf("ParseQueueDiscipline(red) error = %v, want one naming the choices", err)
	}
}
