#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv26904<HOST>
h=$1; shift
exec ip netns exec "knv26904$h" sh -c "$*"
