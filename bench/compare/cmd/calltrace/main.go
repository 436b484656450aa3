// Command calltrace follows bench/compare's MCP stdio calls across the
// client, `maiden serve` and its worker in a system-wide perf trace, and
// says where each call's time goes: the segments between the system calls
// that carry it from process to process, the CPU each process (and every
// other process) used per call, and the wake-ups between them. See
// bench/README.md, "Where a sparse MCP call's time goes".
//
//	perf record -a -e sched:sched_switch,sched:sched_waking,raw_syscalls:sys_enter,raw_syscalls:sys_exit -o t.data -- sleep 0.5
//	perf script -i t.data -F comm,tid,pid,cpu,time,event,trace | go run ./cmd/calltrace -client PID -server PID [-worker PID]
//
// A call is marked by: the client's write of the request (the fd it writes
// most), the server's read of fd 0, its write of the run frame to the
// worker (the fd other than 1 and 2 it writes most), the worker's read and
// write of fd 3, the server's read of the answer, its write of fd 1, and
// the client's read of the response (the fd it reads most). Without
// -worker only the first, second, seventh and last are used.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

type event struct {
	t        float64
	cpu      int
	pid, tid string
	name     string
	rest     string
}

var line = regexp.MustCompile(`^\s*(.+?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+([\d.]+):\s+(\S+):\s*(.*)$`)

func main() {
	client := flag.String("client", "", "the client's pid")
	server := flag.String("server", "", "the server's pid")
	worker := flag.String("worker", "", "the worker's pid (tools in workers)")
	flag.Parse()
	if *client == "" || *server == "" {
		fmt.Fprintln(os.Stderr, "calltrace: -client and -server are required")
		os.Exit(2)
	}
	var evs []event
	procOf := map[string]string{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		m := line.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		t, _ := strconv.ParseFloat(m[5], 64)
		cpu, _ := strconv.Atoi(m[4])
		procOf[m[3]] = m[2]
		evs = append(evs, event{t: t, cpu: cpu, pid: m[2], tid: m[3], name: m[6], rest: m[7]})
	}
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].t < evs[j].t })

	// The fds: counted from the system calls.
	writes := map[string]map[int]int{}
	reads := map[string]map[int]int{}
	for _, e := range evs {
		if e.name != "raw_syscalls:sys_enter" {
			continue
		}
		nr, fd := syscallOf(e.rest)
		m := writes
		if nr == 0 {
			m = reads
		} else if nr != 1 {
			continue
		}
		if m[e.pid] == nil {
			m[e.pid] = map[int]int{}
		}
		m[e.pid][fd]++
	}
	reqFD, respFD := most(writes[*client], nil), most(reads[*client], nil)
	workerFD := most(writes[*server], map[int]bool{0: true, 1: true, 2: true})

	order := []string{"client writes the request", "server reads it", "server writes the run frame", "worker reads it",
		"worker writes the answer", "server reads the answer", "server writes the response", "client reads it"}
	if *worker == "" {
		order = []string{order[0], order[1], order[6], order[7]}
	}
	type enter struct{ nr, fd int }
	last := map[string]enter{}
	type mark struct {
		t     float64
		label string
	}
	var marks []mark
	add := func(t float64, label string) { marks = append(marks, mark{t, label}) }
	type run struct {
		tid        string
		start, end float64
	}
	var runs []run
	onCPU := map[string]float64{}
	waking := map[string]float64{}
	wakeFrom := map[string]string{}
	lat := map[string][]float64{}
	for _, e := range evs {
		switch e.name {
		case "raw_syscalls:sys_enter":
			nr, fd := syscallOf(e.rest)
			last[e.tid] = enter{nr, fd}
			switch {
			case e.pid == *client && nr == 1 && fd == reqFD:
				add(e.t, order[0])
			case e.pid == *server && nr == 1 && fd == workerFD && *worker != "":
				add(e.t, "server writes the run frame")
			case e.pid == *worker && nr == 1 && fd == 3:
				add(e.t, "worker writes the answer")
			case e.pid == *server && nr == 1 && fd == 1:
				add(e.t, "server writes the response")
			}
		case "raw_syscalls:sys_exit":
			f := strings.Fields(e.rest)
			ret, _ := strconv.Atoi(f[len(f)-1])
			le, ok := last[e.tid]
			if !ok || ret <= 0 || le.nr != 0 {
				continue
			}
			switch {
			case e.pid == *server && le.fd == 0:
				add(e.t, order[1])
			case e.pid == *worker && le.fd == 3:
				add(e.t, "worker reads it")
			case e.pid == *server && le.fd == workerFD && *worker != "":
				add(e.t, "server reads the answer")
			case e.pid == *client && le.fd == respFD:
				add(e.t, "client reads it")
			}
		case "sched:sched_switch":
			prev, next := field(e.rest, "prev_pid="), field(e.rest, "next_pid=")
			if s, ok := onCPU[prev]; ok {
				runs = append(runs, run{prev, s, e.t})
				delete(onCPU, prev)
			}
			onCPU[next] = e.t
			if w, ok := waking[next]; ok {
				k := who(procOf, wakeFrom[next], *client, *server, *worker) + " wakes " + who(procOf, next, *client, *server, *worker)
				lat[k] = append(lat[k], (e.t-w)*1e6)
				delete(waking, next)
			}
		case "sched:sched_waking":
			tgt := field(e.rest, "pid=")
			waking[tgt], wakeFrom[tgt] = e.t, e.tid
		}
	}

	// Calls: each client write starts one; a call counts when every mark
	// came once, in order.
	var calls [][]float64
	var cur map[string]float64
	flush := func() {
		if len(cur) != len(order) {
			return
		}
		c := make([]float64, len(order))
		for i, l := range order {
			c[i] = cur[l]
			if i > 0 && c[i] < c[i-1] {
				return
			}
		}
		calls = append(calls, c)
	}
	for _, m := range marks {
		if m.label == order[0] {
			flush()
			cur = map[string]float64{m.label: m.t}
		} else if cur != nil {
			if _, seen := cur[m.label]; !seen {
				cur[m.label] = m.t
			}
		}
	}
	flush()
	if len(calls) < 2 {
		fmt.Fprintln(os.Stderr, "calltrace: fewer than two whole calls found")
		os.Exit(1)
	}
	n := float64(len(calls))
	fmt.Printf("%d calls (fds: request %d, response %d, worker %d)\n\n", len(calls), reqFD, respFD, workerFD)
	fmt.Println("| segment | p25 | p50 | p75 | mean (µs) |\n|---|--:|--:|--:|--:|")
	seg := func(name string, v []float64) {
		sort.Float64s(v)
		fmt.Printf("| %s | %.0f | %.0f | %.0f | %.0f |\n", name, v[len(v)/4], v[len(v)/2], v[3*len(v)/4], mean(v))
	}
	for i := 1; i < len(order); i++ {
		var v []float64
		for _, c := range calls {
			v = append(v, (c[i]-c[i-1])*1e6)
		}
		seg(order[i-1]+" → "+order[i], v)
	}
	var tot, gap []float64
	for i, c := range calls {
		tot = append(tot, (c[len(c)-1]-c[0])*1e6)
		if i+1 < len(calls) {
			gap = append(gap, (calls[i+1][0]-c[len(c)-1])*1e6)
		}
	}
	seg("whole call", tot)
	seg("client's own time to its next request", gap)

	t0, t1 := calls[0][0], calls[len(calls)-1][len(order)-1]
	cpu := map[string]float64{}
	switches := map[string]float64{}
	for _, r := range runs {
		o := min(r.end, t1) - max(r.start, t0)
		if o <= 0 {
			continue
		}
		p := who(procOf, r.tid, *client, *server, *worker)
		cpu[p] += o * 1e6
		switches[p]++
	}
	fmt.Printf("\nCPU per call over %.0f µs of trace per call (two CPUs: %.0f µs):\n\n| process | CPU µs/call | put on a CPU /call |\n|---|--:|--:|\n", (t1-t0)*1e6/n, 2*(t1-t0)*1e6/n)
	for _, p := range []string{"client", "server", "worker", "other processes", "idle"} {
		if cpu[p] > 0 {
			fmt.Printf("| %s | %.0f | %.2f |\n", p, cpu[p]/n, switches[p]/n)
		}
	}
	fmt.Println("\nWake-ups (waking → on a CPU):\n\n| waker → woken | per call | p50 µs | p90 µs |\n|---|--:|--:|--:|")
	keys := make([]string, 0, len(lat))
	for k := range lat {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return len(lat[keys[i]]) > len(lat[keys[j]]) })
	for _, k := range keys {
		v := lat[k]
		if strings.HasSuffix(k, "other processes") || strings.HasSuffix(k, "idle") {
			continue
		}
		sort.Float64s(v)
		fmt.Printf("| %s | %.2f | %.0f | %.0f |\n", k, float64(len(v))/n, v[len(v)/2], v[9*len(v)/10])
	}
}

// syscallOf reads a sys_enter's number and first argument (hex).
func syscallOf(rest string) (nr, fd int) {
	f := strings.Fields(rest)
	if len(f) < 3 {
		return -1, -1
	}
	nr, _ = strconv.Atoi(f[1])
	a, _ := strconv.ParseInt(strings.Trim(f[2], "(,"), 16, 64)
	return nr, int(a)
}

func field(s, key string) string {
	i := strings.Index(s, key)
	if i < 0 {
		return ""
	}
	s = s[i+len(key):]
	if j := strings.IndexByte(s, ' '); j >= 0 {
		s = s[:j]
	}
	return s
}

func most(m map[int]int, skip map[int]bool) int {
	best, n := -1, 0
	for fd, c := range m {
		if !skip[fd] && c > n {
			best, n = fd, c
		}
	}
	return best
}

func who(procOf map[string]string, tid, client, server, worker string) string {
	if tid == "0" {
		return "idle"
	}
	switch procOf[tid] {
	case client:
		return "client"
	case server:
		return "server"
	case worker:
		if worker != "" {
			return "worker"
		}
	}
	return "other processes"
}

func mean(v []float64) float64 {
	s := 0.0
	for _, x := range v {
		s += x
	}
	return s / float64(len(v))
}
