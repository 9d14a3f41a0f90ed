// Command gitserver serves the lab's Git repositories over HTTP on loopback, so the real
// source-controller clones from a real Git server the way it does in a cluster.
//
// It wraps Flux's own test Git server (github.com/fluxcd/pkg/gittestserver), which serves a
// directory of bare repositories with the smart HTTP protocol, push included. The listening URL is
// written to --address-file once the server accepts connections: the lab waits for that file.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/fluxcd/pkg/gittestserver"
)

func main() {
	root := flag.String("root", "", "directory holding the bare repositories")
	initRepo := flag.String("init", "", "NAME=DIR: create repository NAME from the files in DIR, unless it exists")
	branch := flag.String("branch", "main", "branch the initial commit is made on")
	addressFile := flag.String("address-file", "", "file the server's base URL is written to once it listens")
	flag.Parse()
	if *root == "" || *addressFile == "" {
		log.Fatal("--root and --address-file are required")
	}

	server := gittestserver.NewGitServer(*root)
	if *initRepo != "" {
		name, dir, ok := strings.Cut(*initRepo, "=")
		if !ok {
			log.Fatalf("--init %q: want NAME=DIR", *initRepo)
		}
		if _, err := os.Stat(filepath.Join(*root, name)); os.IsNotExist(err) {
			if err := server.InitRepo(filepath.Clean(dir), *branch, name); err != nil {
				log.Fatalf("init %s from %s: %v", name, dir, err)
			}
		}
	}
	if err := server.StartHTTP(); err != nil {
		log.Fatalf("start: %v", err)
	}
	defer server.StopHTTP()

	// Written then renamed, so a reader never sees half a URL.
	tmp := *addressFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(server.HTTPAddress()+"\n"), 0o644); err != nil {
		log.Fatal(err)
	}
	if err := os.Rename(tmp, *addressFile); err != nil {
		log.Fatal(err)
	}
	fmt.Println("serving", *root, "at", server.HTTPAddress())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
