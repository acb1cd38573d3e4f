pt() {
  timeout 60 "$@" -d rxe0 -x 1 > /tmp/l.srv 2>&1 & sleep 1; timeout 60 "$@" -d rxe1 -x 1 10.77.0.1 > /tmp/l.cli 2>&1; wait
  echo "PT $* min/typ/avg $(awk '/#bytes/{h=1; next} h && $1 ~ /^[0-9]+$/ {print $3, $5, $6; exit}' /tmp/l.cli)"
}
for i in 1 2 3; do
pt ib_write_lat -s 8 -n 3000
pt ib_send_lat -s 8 -n 3000
pt ib_write_lat -s 40 -n 3000
done
