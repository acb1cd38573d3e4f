#!/bin/sh
# rsh agent: HOST CMD... -> CMD in namespace knv22218<HOST>
h=$1; shift
exec ip netns exec "knv22218$h" sh -c "$*"
