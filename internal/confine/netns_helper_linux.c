// The network-namespace helper of netns_linux.go, for a maiden that may not
// create a network namespace by itself (not root): a constructor that runs
// before the Go runtime, only in a process whose environment holds
// MAIDEN_CONFINE_NETNS=PORT. Being a fresh single-threaded process, it may
// unshare a user namespace (mapping only its own user and group to
// themselves, so nothing gains a privilege outside) together with a network
// namespace, in which it has the capabilities to bring loopback up and to
// listen on 127.0.0.1:PORT. It sends the listener and the two namespaces'
// descriptors to maiden over fd 3 (a unix socket) and exits; a failure is
// sent as text instead, without descriptors.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define HELPER_FD 3

static void helper_fail(const char *what) {
	char buf[256];
	int n = snprintf(buf, sizeof buf, "%s: %s", what, strerror(errno));
	if (n > 0) {
		ssize_t w = write(HELPER_FD, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
		(void)w;
	}
	_exit(1);
}

static void write_file(const char *path, const char *s) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		helper_fail(path);
	}
	close(fd);
}

__attribute__((constructor)) static void maiden_confine_netns_helper(void) {
	const char *p = getenv("MAIDEN_CONFINE_NETNS");
	if (p == NULL) {
		return;
	}
	int port = atoi(p);
	unsigned uid = (unsigned)geteuid(), gid = (unsigned)getegid();
	if (unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0) {
		helper_fail("unshare(CLONE_NEWUSER|CLONE_NEWNET)");
	}
	char map[64];
	write_file("/proc/self/setgroups", "deny");
	snprintf(map, sizeof map, "%u %u 1", uid, uid);
	write_file("/proc/self/uid_map", map);
	snprintf(map, sizeof map, "%u %u 1", gid, gid);
	write_file("/proc/self/gid_map", map);
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct ifreq ifr;
	memset(&ifr, 0, sizeof ifr);
	strcpy(ifr.ifr_name, "lo");
	ifr.ifr_flags = IFF_UP | IFF_LOOPBACK | IFF_RUNNING;
	if (s < 0 || ioctl(s, SIOCSIFFLAGS, &ifr) != 0) {
		helper_fail("bringing lo up");
	}
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in sin;
	memset(&sin, 0, sizeof sin);
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&sin, sizeof sin) != 0 || listen(l, 128) != 0) {
		helper_fail("relay listener");
	}
	int fds[3] = {l, open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC), open("/proc/self/ns/user", O_RDONLY | O_CLOEXEC)};
	if (fds[1] < 0 || fds[2] < 0) {
		helper_fail("opening the namespaces");
	}
	char one = 0;
	struct iovec iov = {.iov_base = &one, .iov_len = 1};
	union {
		char buf[CMSG_SPACE(sizeof fds)];
		struct cmsghdr align;
	} u;
	memset(&u, 0, sizeof u);
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
	struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof fds);
	memcpy(CMSG_DATA(c), fds, sizeof fds);
	if (sendmsg(HELPER_FD, &msg, 0) != 1) {
		helper_fail("sendmsg");
	}
	_exit(0);
}
