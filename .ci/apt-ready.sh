# Sourced by the .ci install scripts: `apt_ready WHAT` returns 0 when Debian packages can be
# installed here (root and apt-get), else prints why, naming WHAT, and returns 3.
apt_ready() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$1 install: CANNOT INSTALL: not root" >&2
        return 3
    fi
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "$1 install: CANNOT INSTALL: no apt-get (not Debian or Ubuntu)" >&2
        return 3
    fi
}
