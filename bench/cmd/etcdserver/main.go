// Command etcdserver runs one etcd member, embedded (go.etcd.io/etcd/server/v3/embed),
// in its own process, for the benchmark runner: by default a single-member
// cluster on the given loopback ports and data dir; with --name and
// --initial-cluster one member of a static cluster (the runner starts three).
// It prints "ready" on stdout once it serves clients, and stops on SIGTERM or
// SIGINT.
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	clientPort := flag.Int("client-port", 2379, "loopback port for clients")
	peerPort := flag.Int("peer-port", 2380, "loopback port for peers (single member: unused by others)")
	dataDir := flag.String("data-dir", "", "data directory (required)")
	name := flag.String("name", "bench", "member name")
	initial := flag.String("initial-cluster", "", "static cluster, name=http://127.0.0.1:peerport,... (empty: this member alone)")
	tick := flag.Uint("heartbeat-interval", 100, "raft heartbeat interval, ms (etcd's default)")
	election := flag.Uint("election-timeout", 1000, "raft election timeout, ms (etcd's default)")
	quota := flag.Int64("quota-backend-bytes", 8<<30, "backend quota (etcd's default is 2 GiB; 1M locks need more headroom)")
	flag.Parse()
	if *dataDir == "" {
		log.Fatal("etcdserver: --data-dir is required")
	}
	cfg := embed.NewConfig()
	cfg.Name = *name
	cfg.Dir = *dataDir
	cfg.LogLevel = "error"
	cu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *clientPort))
	pu, _ := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", *peerPort))
	cfg.ListenClientUrls = []url.URL{*cu}
	cfg.AdvertiseClientUrls = []url.URL{*cu}
	cfg.ListenPeerUrls = []url.URL{*pu}
	cfg.AdvertisePeerUrls = []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	if *initial != "" {
		cfg.InitialCluster = *initial
		cfg.InitialClusterToken = "fencebench"
	}
	cfg.QuotaBackendBytes = *quota
	cfg.TickMs, cfg.ElectionMs = *tick, *election
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatalf("etcdserver: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Close()
		log.Fatal("etcdserver: not ready after 60s")
	}
	fmt.Println("ready")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-sig:
	case err := <-e.Err():
		log.Printf("etcdserver: %v", err)
	}
	e.Close()
}
