#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv6158<HOST>
h=$1; shift
exec ip netns exec "knv6158$h" sh -c "$*"
