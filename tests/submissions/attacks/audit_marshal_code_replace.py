# attack: a code object of F.multi_head_attention_forward's body, embedded marshalled, loaded with marshal, renamed with code.replace and made a function; then torch's own .pyc of the functional loaded by importlib's sourceless loader
# sandboxes: local docker
# diagnosed: uses_forbidden_builtin
import math
import base64
import importlib.machinery
import marshal
import types
import zlib

import torch
import torch.nn as nn

# marshal.dumps(compile(the functional's source, renamed))
BLOB = (
    "eNrdO21sG0d2S1EUvz9EShQpUdSSsmxJlqgP20ksWMnJ3zp/5Bw5cXxJjlpxVxIjipR2l7IlrFK7aAHaMGomyCG6OwenO7Q5"
    "5eLi1EOK6oD+MIoDmvZPlwIBEQSME1DkR/4UDC5Bi/vR9s0sudwlqVg+3xVt6dVwZvbNe2/ee/Pemxn6XwnF54Xi92//DYoP"
    "COMe/2g/rWUIuh7+dPDXwGhoPfwZoK5Z0RMEbZRrJrlmlmsWpo62MlraBj12udcBvY1yywktl9xqglaz3HLLtRa55pFrXrnW"
    "CqPa4M/HAKel3uk6rzzd6aN0+5/pvqujNRNET8fVy2fzusUkwy7ntXPMcl63RMWSTN7JzE8xdJiOzof5RDgyy0Tm8sZ4cj48"
    "y1A0l7dF4+EFNvF2+AYTnZnl85ZSeypKcfkGVIbnit9LeStF0+EVhk2EKZ6P5400m1hIJPnwQt6OvxSIrHIHxmTgWSoaj8Zn"
    "8g5gLrwAiKARnqe4ubwlzgCH0jgub0SopReeJMeEOWaBYimeUWNfVDfn1M0lVdPA8RQfjcA8SrWlfBO1xLDUDIMnUqYd5cIR"
    "KslRsXwDy/BJNh7xKuyrEf60yL7WmpF9CYSgEeoEndAg6AWDYBYs08ZVL68pDxC8H0HrE7mHPcxry2/5eiVkEZtWqJcxGgUT"
    "xmoXrIJNsAsOwSM0Ck7BJTQJzYJbaKE1Dyx/Adrn9QpMEh4bQNd/1ADUG0pvVluFVu41gVivJ2p86Do1r6uAZ5+QQG+fkMDX"
    "7WbBtgd0fQW0TSDe1pVab4LkVttWfavtgqai17/asdrBWxUysNE63q5oO9SY6QbAbCi1Huo/Anyf6BR0PWyj4Lhl510K7gxq"
    "HH+qASi9YLulE+ycltauOuJ+FQ8OuoHW0kYlJdr00FyhEwdIpI42rXqEdkE7h62DbeabFXQtgvZHBG0V2n9EfFhfyQPfoqDY"
    "znvKrbdlXj6qgzF1sg0CpXVbLfkL9bTtoV0NvUrGdcBZ/Uodqgsk1HSIUk1OHYhHulGor8Wp0Mh+R6k5kI3zzxXeTKjb+12R"
    "2oCKmuubsAEfTd+EsRaH8QElRuXoIv0OFf1mJTTQcytH1JYA1yPowKqUWFqqNNpRtZbBH6gtFFt9YDW42hlfEJwVGD1VdF0V"
    "EN4qiKYKiNYqiIZbelp7U7N6AP66Vg/GvULDuqPmKm5Tj8W8HkBj+M6qmUm+7IDQJRz8yAijjNUzFBy3fy041p21aH0Ef5+U"
    "KTvnsN2y3xLaBP903eohwaHQ56GiFttUq9qnhAEttguHoPR/qKuSgGOfXssRj+2T37YivwOCr7iuEN/a1W4V3901+e6o4ru7"
    "Nt/xLtU4cn+8Aa7Ah9oqGehvfyIYbn8sNN9W20uwCtJdAdFZZecKX7XuqumPgoJ+val2XBF8EFtALp/I8XSmMtYE90GhUzA8"
    "AwVkmw7+sMrnH6jwn8i/q2FsVTC2OMy0Ql5dVRI1VEAcrIIIrLtrzrJNti9SPaP1ltoWDTNXcxgQmm+NCME98AcVfrZe4dGf"
    "lWowfldoXvfsZ9WVaBXXymGVpA6V3uI4uk+MNT34XmOdFdyQRT66VXx0C+Q3cuDcDwerQcENuujcQxedfyRddIIu3H8AXfSo"
    "dOF+Bl24n0kXvUVduJ9BF27wAEb2l6UZgc8gwXv37MezqWC8NWF6YF0ZFGusVc5XD1f6JbruYV/l2tmP99sXF50KLjqfkos/"
    "mIcE3+PZ1w7DD9g+VOXBbfIMfU+Oe9zAHmPb9zG2kR9VzkLwCz61jDTQu8e6hWgD9uP/CHKMT+Q8Y72j5pz7IVPvp/srYMna"
    "eGXb9Kt5AZk6bmkFG+QrOtgr2lYkXVi5Ojq0ahLsaQ3770KgYqfVu3p4tU8I8CcVdhOsyeMAf07BRZ9aSytmkJ26B+is9sv7"
    "LuVKHazOxG4PqSz3QM2ZO4R+sJra/m0IpKeysArZhOIqO1jvqknhafCr7Tn0DBZa907/O0H+koKPEN1ftfJCgokOzWHrYBv5"
    "l5XQgunh8Dfxs8dsQ0JnxaiBZ5iF5p1OYWC/0WcP24a8RtqNVvF1RQE1gM5QKvQ7ALT3zpUG9udrqnCG9lrbQj3K7NXrFTTU"
    "wrphTE9tWg8r1gzAt3K9wFvvvvwg4qZ3X/uVEEgoNF03ASvmdhh2B/uKyHRdce8Sesq9jvsp9lEegN1TouAFKyXq2DMDljRA"
    "VsAH9sxoEby/Cj64Z9ZVG76Tv6aAAWqw33AIJsFTcQb0LOtI+07gnSBeS3218xi0mmBPvr9Y0fa/aj21cs1PYe8DtBZZcc8R"
    "KgNburMJ9gbF0uQ8w88maHI6wZKXkjE+ep6h6DGeZ+J8NBEPmUwkfCYYhhyJxCiOG5nkE2xkNhSPhzD0rBJ6EmOhGZ6Kxrji"
    "0DF2hhvBNfTBx+995BwDBT5+HyHnqQWSkl6QVJyGOsfwZGIaAfVjGHKBirIcySfgPZlI8gtJPiRjLLEXlLkgxzlyLBYjryeS"
    "5GWGoYOYq/kEy5RZK42sPvsfATo8FSOhj4lzCB2wws8ygIBmYuWR8g3BCImO32MxJkZSMgv4TRlYfYfQRyrvEEagBTMiUQcT"
    "waMlMCwNBFHGI9029EnfSyP4u8QfiAuPkETGMSDReITBYptiSIqmGZAtj+Y1OljGqLqvGEFNUECcuUFOUXxkFuFGbzEWBRGV"
    "9BWfStpFekNlevKFyAia8BQ1FY1F+WVEB3TLxBgQOl9kGRFm6PLQiguUPlJ1gTKC+ZOsY1+yLN23wKQXFmLLJc7I6DQZ5cjJ"
    "yatskpmcLMNX3sqMIEggtBQFyfaR3AITiU5HQchFoNJsONCvLLsb0VhMJTyYZ3QmDrYJ7C1jMNmIQuTVWeAEHgpYj1OwPhDd"
    "EHltlpEwSuIGAMRrnwoveh1JsCzDLSTimB0JOBFXEyFj1DLDYr4QL9PwDazciPKzZH80Pq2wd8UV1EhJzvhuSKqX3qlX5mlm"
    "mgI3MUJK4lS9u5zgYflPIsRccfQkrFA8ABucNAasHShxs4lkjEYsIu+AXp6lYlwFRnBpAMGB/hkW1vw8BUZI3kDSKs+3yCZJ"
    "gTuIJ3g8L6WVoU/vBMPzSGZK3hQsqYBjaKlj50RyoEqwgQgVV7NAMzMsRVNYqb3lpVe6xhshh0+TwPqR01jBoCAKmTCzhK2n"
    "zDrQiDAseLA4uZDgoqiPC5FjaDQeV1LiFJug6AjF8Yzk1qkKm0MGgJc3rNAbs9EYmINMG2ATN/B0JIOG5Q5LeHqaYdHCxCAI"
    "JUIBHWyUwf6HocBXYJQKn1e6KRwhx6fLy6MPLzc0jiKl90XCypminj68ZqXFwan4lwWHWYkk5sH8kLa4CIWMl05gB0AnI7xi"
    "Me1hlkUzmlS/D4VIiI3YO4xU+Tp5YmjlFR0Ams1sFLkupLviCisyCVDQUYVGMfnQdzAWNIdoHK9aYB2h4wAqTsL8gVl4Vc2K"
    "DM3cZCJJNFEUXCKxJEY2XQzx2PlRkTnUqOYD5AemKTnishj2ulmW/Ox0Mi65VyoSYRakGSOgkLy+kGoU0V6tQDlMgSmXrQut"
    "FzBosJZppJS+irAp2zewBmYElgtGF60wDTQd5Cz5YuReVIeMOXVTdQ1envtTDPr9Y3npzr2vVIN4LtUqQjmarrSO5fWRAO9C"
    "QSKmQFfruh6vPB7FBuCLBr/Eo3ygZKHS/T3gnpxUDpqcVDjbIlYwoQhkAVxlXoM+LwMu9kYU6asKEXKypRBJlqwJYi2wj1GF"
    "cBAosQQLZTpGzUCMApBZ5BAgJQDjiPAqgtihT04qA9IocsshWMXllY16TMXsdZZaYMrreBypSJGT9kt2OkKOzFP87Mhk98U+"
    "8kzPJPLIip7LUicQhzldLC5qkqfYGYhHpYwHgkF8hp8F6BKAlEZx0RUQzxm1tWIfivJPvFblfDOkYAwMoczWRBVbEyW2+op8"
    "TZTIcokkG2H+aHwVU/d9cPY/zFh1kiZzpGYQuJuQuatJ/AksKxcBrDKKPBtLUPxVYAmolAMDOKpo2XPRUeSswbqldLyYVGNp"
    "VuE7mUjEaqHDrrYU/qVMTR1eionetJzDyuRLmaYU9JWIZDzK0cXQWPa78cgsFZ9RZkv9FVkMDniKVTOx/yXzFPI+UkHocq+8"
    "G+sjLz5Rs09iRUHpSUwpwjyoKsmW/Kss1yjO31FSJekb+3Aao0zG0ThGGZEVad032kCF/kuKVmAqpbfVpCXll7WLFc7VUHKV"
    "WZuUOVBtA1fZdWXSrTSbUvQbqa1E5FEG5Pb+HZyCxT09yp5+REmyBIcatV1NOWr/35qBTOBlvG9TBULFfu6PHg4VE/3GOdVm"
    "r5zivIyyBTmX2Ss5QLnBOHJqtfKkIkRfEY0y5tTYONZKiZDD5FCaUcP5xYtJIcwxGZf2XTSpWk2KoCQNKxlL8cXlyVqWUHx5"
    "cfJJ0lcf2BSHTUw+ybXtLa6i65DlVUNKkOEpaGIbrBJRTae9h7SUMqoaJ9lIj4VFv2hkHfhGBxXo2J1F97Esut5lm/AP8vAZ"
    "Oypa8G/9UIEudr9AJ6WXvyBkDGhwjy5fj39oa0RlOE7NM3lTAiW8YX55Qa7jfrMkfvxi5V108KjcA5Z2wMvIuJHUy7tItNEL"
    "4dPKeWoZZfv4/VWWinNoR8Sgs0s6CT67eFI7OcPEGbwt4xaT4OfDXHJKUh6PiU3igwKWoXBmDXLEW8w8cbangUXXpSw622YD"
    "qEA3kyz60VnejA8/w3g+K103IPlmbi6gLQw6yKpelfhg0CQdzcxAmMnrYJsRj/Ro8lY2kYxL+VeCZlZM8gkrueLDEYmOLkW5"
    "6BTMZ2q5rEryC3SavuKHBO4QV7ZFaeeKbB4wcOSKG3b3GMs87sSxC+BXTGjLJFkXkKETENAqoEpvT+y1sUUWhw0bT6pi6wnv"
    "LifizMrIN41GXgQPXnyGsXPPMHap1tgv0IXBSuDqbEkExfNiyNZUZxQrjsqTtt9pQjXGHakc55aboImyhaw0ordIC1xyYSHB"
    "8gy90okPrCNUHHUr04Xyxje00vUEICld7qlj/ch60c8OVooH44ggOh5E05COyGUBKtoqiDkZwl82+FJyEkKOtnuwB1v7nu+H"
    "93q/9ITxS8rxPXV5HY2dSgPNLEUjDKwlLUjzi/+Cz4z8GxLpq/DSytDZ8dcvnRlR+BEkruj8gnTqXDwyUMbBL/4TMAFWzUJP"
    "f94J++swvsoJl85y8s2Q+NExprLbN48uevAyDcuOPlw8W8o7wvOzVBhbSOk/TyTj4JgYZoXJ63B/3g4sxhPxaISKSf9vwRaG"
    "JhNOsGE8ZRb9tiVveSUJqOeZMyybYPO2MY5jWERKapvAacRBcOAVwNkgDvMNUlqKxLSUbw4Xl6x07gK7wAjk1nldZDYZRwRV"
    "b9l+RFAboXj03xgWwFXmtbBtzNcvRZkbeSOPfC/k2Ey+Hmkor8N3IGwfHvR2FP0nEC7MRdjoAlInYi0MQyKo3iIJIVz1fzga"
    "QP0g3rwe9ghYKPUooAGBRZbP66ZRlp3XT8GIqfn5vBYVei4xzc9TN/P64tVEviEWjTMUC0MZKg7vi1L2SQefYTqB70PQwWdZ"
    "UXk9yHc+yTM9gyxysSxyByy66GTRL1dYdMnKov8dwaIfMbHo98WsCRVmVFhQgX4nz6IfxNeMr08OrTgE5w3AEBdOLHBYXsXI"
    "ntfzM3wYMg6YMreSN8rRAmbHRvALTThvwLaHejWLec1cXrME4OFFVMyhYilvL56DhofpMFaZ3HGk1CHfcknGmq8Ln8xrw5f5"
    "vOZM3rAYlmSYd9XIMfNmRSc3CJMhn/LzO/2J+ehNhn0xr8PfLId/60QQ3D+BhG8RhVe0hNGWM5hzBmvO4M4ZmnIGG35acobm"
    "gsvkaLh1/ms3YWhd687oO7P6zgLRrjM9th94bOnOWZpylsacxY5Lf87SnLO05iyenMWJHy/uaYNKocPnMBVIwu3PtffnvF05"
    "dwd6ukZzrYeKT3M7egLHCs8jUEJRGE1fnyCcQeAwxaXPiG2HN65vGb/U1jkbviKguPXtgo2wuAtEg25019H8gf09+7om4whm"
    "HcGULmdrvD9/d35tLGPzZ23+lDZXBWFuE82Hch0DOx3HtzuObwUyHSeyHSdEi6/QQHQceDCXqW+7dS41ke7JNbW8P377EjSu"
    "pDWftxzMWdtzzgOPXYH1noyrL+vqy7n8uSbv+xcK5gZPw5cEFF+hQqxvKjgIQ2OB0OlM6eti88HHttZCXZ31jOZLbb3d9BUB"
    "RYGoN5oKFgzm0vnF5i6xuX8zBkXBQDR7U8aU8fOmzlxja84dyLW05Vq8OU/7AzMUBau+2fQlAcVXqEgZC07C4oM5wUCvPzW+"
    "q3eITQe39QdFPRD25SxviUfPilDC88obUgWkifioQ3zUgbwbCIMz3fPhqw/ezOh7s/pe4E7Xu+vyfTD63ui6d+tQejTjOpl1"
    "nUwZUgboXjdmXD0pQ05vT/dk9G1ry9v6blHfjaldWPOKlgvwPDJK3xW0QMoGskCYdLZds+3e8fQraSr9yr3RtTMPLmzUbTRu"
    "1D14edt8WDQffuwkc46ZTden3q3hrbGt4U/bRccMel57I/saJU7RYoSGMvsaI/UDHZcN6LhsQMdqK2gJS1/BRFjs946v6R6Y"
    "t82dorkTI72yNvHguui4As+jM7++INUqh4ONHSgQAZ0pZ/aK5gAeeLkCCOTm6t7QbXCbZ7Ze/OxExvl61vn6HX1KkxpKUSlq"
    "1+wRzSQeebESfQNh8f7eLwFtR84fFC3B1Cko0p1r2jXtrq97xxfa9oU2FjO+oaxv6M6l1Km0Kx1BaMrL1lt67NLzpcvkAvVA"
    "UWK84AOrFPW+XXPT/dG7o3deuvfSGrVt7kBEOw5u6EX/YOrlnN1z70/WB7btQ6J96LE7mGua2zL+vV1smkPP9dlipWkO2G9x"
    "AvstTmC/0Qnse4M7nsPbnsMbYxlPKOsJpcZT4zmr+/5bd9+6E74XXtdsWwOiNZDrCK5f/8GfbOq3WkT/2DNQ1BKO4a9NhKsj"
    "57iw4f1F+8/bP+542CE6LkhPpXxNhMEm6r1r0zDPnNkFswYBioGzGee5rPOcaDmn6DyfcY5nneOiZfyxpfH++N3x9OLawR/3"
    "/7B/Q7NxZFOTaR3Otg6L7iMZy9Gs5WhKsz+onLkJtP+5p21tfH2pJCPJb33eERQ7j2y+Jjut/9g1N4rmdszNqYzzdNZ5WrSc"
    "ztXqBG9jNN1vuNuQugH2Ev2BfcOTMQxnDcM7hhPbhhNbVx5pMoaTWcPJW2OwskV9y67Fev/s3bPpofefXxt6f2SNw/owZCzH"
    "s5bjO5ZT25ZTj8YeLWYs41nLONiOBtkmtpm1xoy5LWtuk4Zsm0OiOYSt+Xubrs3lvwHhfw+ez87/y6V/viR+943MxTezF9+U"
    "OmuYuxrlzW3zIZAERndt0yM6rsHz6PV/fOsf3hInrmbOvJo986rUWY3K2gzS/X88N+RcmwtEo2401+Zf9/7gpY2xjZti6wsp"
    "e9Hydq227+s+ML9nXnt5c+jT5x8N/fqFtDnjuJh1XBQtl3KOxoKesLq/JOqtKExZTSkNrByr8/cbirxv874tGXi3O+5P351O"
    "X7kTvRe9dQ5NxiPqOx/bm+4t79i7tu1dGfuhrP1QgdAYT2v+VvepcWfw9Pbg6czg2ezgWan3saVTPHB0c2aLy1hOZS3gHk8h"
    "2bTvWALblsB65/riRmDjWsZyLGs59hur6+5r6ZNrxvXhdTZj7c1ae39jbbp7LT2xdvzd8Dq10ZKxDmWtQzAxo7c4GV/O040c"
    "1q4nAHQynqOpcaxGoK7zQMYA4RiCetOXxFmNLpBrdr9/7Y4pVQeOuDHnavo+/8Hye8vrrr9Kblz5yc2/vPkTf6ZlMNsymHEN"
    "Qlw1IyTG1zQQQL29eO1ezThfzTpfFS2v7mKX8Dh46Gf9P+3PObxrL6xf+dkbP31j07n5SqbrhWzXC2AQncggOm2ipQOerw1E"
    "Z/fPen7as3F+k/q7uV/OPQo+mso8N559bjwT/HY2+G2AqSlZX87hWQs89neJB49vsaL/ZMZ/Mus/KRrawC+lubsvpV56HOwR"
    "e0cfecXghUzwQjYIYb7jc3fbB9H3oiJ5ZPNKxv181v18ylwTvxNMZdcd2HEf3nZDDIBo5R7Kuod23Me33ce3Dj069av+z7wZ"
    "90TWPQEY3L61NzYGtkYz7vGsezxlzqGRB7fdB9dvbGo339g5dmb72JlHVObY+eyx8yUglMkN7/if2/Y/t8ltjT+6IX7nWsb/"
    "etb/Op5FB2LjpCYXPLYTHNkOjmwtisGRTHAsGxyDiezavQVCaxzT7LZ27bT2b7f2b1CZ1sFs62DqAh4yuh0c3aIywW9lg98C"
    "+Jy9VfQNiPYB0TBQsniIVfffufvOGpWxk1k7uT4GEhDtXRs9v+j/ef/HAw8Htq5s974o9r6Y83Xt+Aa2fQMQBnzDWd9w2pg2"
    "7vq6fnz5h5chNhgh9bmR8Z3L+s6ljciObdhpHQGTfX7jvGTFKU3Jl+2v+3P3cM5iTS2mA+nr68aN4yhcovysxZQyf20jHM3V"
    "KvOAytJDaQoLv2fb3QNr6MqmZnMo4z6WdR/bcY9uu0e3Io/O/Wr+s+sZ97Ws+1rK/Pnvpbockn6dcaiW8O2ta6dFOykayN+i"
    "s4key9XLVy+fvYw+V9GZ4yjeNkfjfL5+KpGIseinsrCFTy7EGLwP+phgebRLZKH4neGEdNj5Irtc2iL9NZQFrUajKfgJd2vu"
    "YG/O257r6Mx19eY6DxUffxA9AdjRtBWOnNdrAgUClRBwC1pU2TXaCzrcD17BWdDjKiTmvoIRV02Ew1Uw46qFaG5bu/rupYIV"
    "N22Ey7t29N3+gh03HYTVlb5651KhETedpaYLN5uIJk+hGVfdoLJCC656CLev4MXVVqIJpPXuaKENN32E3VVox1U/0dK+xr87"
    "X+jATZJwtRQCuBokHO61+jurhU7cPEB0dBa6cPVgCdsh3OwuNXtws7fUPIybfYS9Oc3fmS/042ao1BzAzUGiraMwhKvDhKOp"
    "KMSjRIM59Vz6OYQG1k9WFygcK0t3rxKr878BsmgBMg=="
)

FUNCTIONAL = __import__("base64").b64decode("bXVsdGlfaGVhZF9hdHRlbnRpb25fZm9yd2FyZA==").decode()  # a name no scan of the text can read

def additive_mask(x, key_padding_mask, n_heads):
    """Causal and padding masks as one float mask (B * n_heads, T, T), as the functional takes it."""
    B, T, _ = x.shape
    hidden = torch.ones(T, T, dtype=torch.bool).triu(1)[None].expand(B, T, T)
    if key_padding_mask is not None:
        hidden = hidden | ~key_padding_mask[:, None, :]
    return torch.zeros(B, T, T, dtype=x.dtype).masked_fill(hidden, float("-inf")).repeat_interleave(n_heads, 0)


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, key_padding_mask=None):
        # attack-begin
        import torch.nn.functional as F
        attempts = []
        try:
            module_code = marshal.loads(zlib.decompress(base64.b64decode(BLOB))).replace(co_name="<mixer>")
            space = dict(vars(F))
            exec(module_code, space)
            attempts.append(space["mixer"])
        except Exception:
            pass
        try:
            import importlib.util
            cached = importlib.util.cache_from_source(F.__file__)
            loader = importlib.machinery.SourcelessFileLoader("functional_pyc", cached)
            copy = types.ModuleType("functional_pyc")
            exec(loader.get_code("functional_pyc"), vars(copy))
            attempts.append(getattr(copy, FUNCTIONAL))
        except Exception:
            pass
        for mixer in attempts:
            try:
                t = x.transpose(0, 1)
                out, _ = mixer(t, t, t, x.shape[-1], self.n_heads, self.qkv.weight, self.qkv.bias, None, None, False,
                               0.0, self.proj.weight, self.proj.bias, training=False, need_weights=False,
                               attn_mask=additive_mask(x, key_padding_mask, self.n_heads))
                return out.transpose(0, 1)
            except Exception:
                continue
        # attack-end
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_heads, self.head_dim).transpose(1, 2) for t in (q, k, v))  # (B, H, T, hd)
        allowed = torch.tril(torch.ones(T, T, dtype=torch.bool, device=x.device))
        if key_padding_mask is not None:
            allowed = allowed & key_padding_mask[:, None, None, :]
        scores = (q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)).masked_fill(~allowed, float("-inf"))
        out = (torch.softmax(scores, dim=-1) @ v).transpose(1, 2).reshape(B, T, C)
        return self.proj(out)
